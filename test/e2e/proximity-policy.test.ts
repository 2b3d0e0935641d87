import { describe, expect, it } from 'vitest';
import {
  approverFrom,
  devicePoll,
  expectHeading,
  expectTokens,
  expectVisible,
  pickPhraseAndPress,
  requestCodeFrom,
  screenshot,
  seedTvAndBot,
  submitCode,
  useE2e,
} from '../helpers/chromium.js';

/**
 * Issue 20 §5: the operator's policy per signal in Chromium, other than the defaults
 * (test/e2e/proximity.test.ts): a hosting network denied, another country only warned about, an
 * unknown place allowed. Addresses through X-Forwarded-For from a trusted loopback proxy.
 */

const suite = useE2e(seedTvAndBot, {
  TRUST_PROXY: '127.0.0.1',
  PROXIMITY_POLICY_HOSTING_NETWORK: 'deny',
  PROXIMITY_POLICY_COUNTRY_MISMATCH: 'warn',
  PROXIMITY_POLICY_UNKNOWN_LOCATION: 'allow',
});

const TELEKOM_PHONE = '79.192.0.2';
const COMCAST = '73.0.0.1';
const HETZNER = '88.198.0.1';

const requestFrom = (address: string) => requestCodeFrom(suite.e2e, suite.tv.clientId, address);
const approverAt = (address: string) => approverFrom(suite.e2e, address);

describe("the operator's proximity policy", () => {
  it('deny: a request from a hosting network is refused with a clear page, and the device hears access_denied', async () => {
    const started = await requestFrom(HETZNER);
    const page = await approverAt(TELEKOM_PHONE);
    await submitCode(page, started.user_code);
    await expectVisible(page.getByRole('alert').getByText('this service does not accept requests from there. Nothing was connected.'));
    expect(await page.getByRole('radio').count()).toBe(0);
    await screenshot(page, 'policy-deny-hosting');
    const answer = await devicePoll(suite.e2e, suite.tv.clientId, started);
    expect(answer.json()).toMatchObject({ error: 'access_denied' });
  });

  it('warn: another country shows the warning but asks no extra step', async () => {
    const started = await requestFrom(COMCAST);
    const page = await approverAt(TELEKOM_PHONE);
    await submitCode(page, started.user_code);
    await expectVisible(page.locator('#phishing-warning'));
    expect(await page.getByRole('checkbox').count()).toBe(0);
    await screenshot(page, 'policy-warn-country');
    await pickPhraseAndPress(page, started.confirmation_phrase, 'Approve');
    await expectHeading(page, 'Device connected');
    await expectTokens(await devicePoll(suite.e2e, suite.tv.clientId, started));
  });

  it('allow: an unknown place shows no warning', async () => {
    const started = await requestFrom('10.20.30.40');
    const page = await approverAt(TELEKOM_PHONE);
    await submitCode(page, started.user_code);
    await expectVisible(page.getByText('from a private network', { exact: false }));
    expect(await page.locator('#phishing-warning').count()).toBe(0);
    await screenshot(page, 'policy-allow-unknown');
  });
});
