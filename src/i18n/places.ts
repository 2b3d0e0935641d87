import type { Place } from '../geo/locate.js';
import type { MessageKey, Translator } from './catalogues.js';

/** What a page needs to say where an address is: a located Place, or the context stored with a decision. */
export type PlaceFacts = Pick<Place, 'kind' | 'country' | 'city' | 'network'>;

const KIND_WORDS: Record<Place['kind'], MessageKey> = {
  public: 'place.unknown_place',
  private: 'place.private',
  loopback: 'place.loopback',
  'link-local': 'place.link_local',
  unknown: 'place.unknown_address',
  proxy: 'place.proxy',
};

/** "Berlin, Germany", "Germany", or what kind of address it is ("a private network"). */
export function describeWhere(i18n: Translator, place: PlaceFacts): string {
  if (place.country === null) return i18n.t(KIND_WORDS[place.kind]);
  const country = i18n.country(place.country);
  return place.city ? i18n.t('place.city_country', { city: place.city, country }) : country;
}

/**
 * The place and its network, one way for every page: "Germany on Deutsche Telekom AG" in a
 * sentence, "Germany · Deutsche Telekom AG" in a list.
 */
export function describePlace(i18n: Translator, place: PlaceFacts, style: 'sentence' | 'list'): string {
  const where = describeWhere(i18n, place);
  if (!place.network) return where;
  return i18n.t(style === 'sentence' ? 'place.on_network' : 'place.with_network', { where, network: place.network });
}
