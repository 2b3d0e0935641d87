import { pick, shuffle } from '../../lib/random.js';
import { ADJECTIVES, NOUNS } from './words.js';

const PHRASE_CHOICES = 3;

function generatePhrase(): string {
  return pick(ADJECTIVES) + pick(NOUNS);
}

/**
 * The phrase and two decoys in a random order, fixed per request (stored with it) so that a
 * reload of the approval page reveals nothing.
 */
export function generatePhraseChoices(): { phrase: string; choices: string[] } {
  const phrase = generatePhrase();
  const choices = new Set([phrase]);
  while (choices.size < PHRASE_CHOICES) choices.add(generatePhrase());
  return { phrase, choices: shuffle([...choices]) };
}
