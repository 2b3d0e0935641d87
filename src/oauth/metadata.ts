import { REGISTRABLE_SCOPES } from './scopes.js';
import { ID_TOKEN_ALG } from '../keys/signing-keys.js';
import { DPOP_SIGNING_ALGS } from './dpop.js';

export const DEVICE_CODE_GRANT = 'urn:ietf:params:oauth:grant-type:device_code';
export const REFRESH_TOKEN_GRANT = 'refresh_token';
export const AUTHORIZATION_CODE_GRANT = 'authorization_code';
/** RFC 6749 §4.4: an app acting for itself (issue 32 §3: a Shared Signals receiver managing its streams). */
export const CLIENT_CREDENTIALS_GRANT = 'client_credentials';

/** OpenID Connect RP-Initiated Logout 1.0: a page a browser is sent to, so outside /oauth/ (whose errors are JSON). */
export const END_SESSION_PATH = '/logout';

export function endpoints(issuer: string) {
  return {
    authorization_endpoint: `${issuer}/oauth/authorize`,
    device_authorization_endpoint: `${issuer}/oauth/device/code`,
    token_endpoint: `${issuer}/oauth/token`,
    revocation_endpoint: `${issuer}/oauth/revoke`,
    introspection_endpoint: `${issuer}/oauth/introspect`,
    userinfo_endpoint: `${issuer}/oauth/userinfo`,
    end_session_endpoint: `${issuer}${END_SESSION_PATH}`,
    jwks_uri: `${issuer}/.well-known/jwks.json`,
    activate: `${issuer}/activate`,
    activateBot: `${issuer}/activate/bot`,
  };
}

/**
 * RFC 8414 authorization server metadata, also served as OpenID Connect Discovery 1.0: the device
 * flow, and the authorization-code flow with PKCE (S256 only) for web apps.
 */
export function serverMetadata(issuer: string) {
  const e = endpoints(issuer);
  return {
    issuer,
    authorization_endpoint: e.authorization_endpoint,
    device_authorization_endpoint: e.device_authorization_endpoint,
    token_endpoint: e.token_endpoint,
    revocation_endpoint: e.revocation_endpoint,
    introspection_endpoint: e.introspection_endpoint,
    userinfo_endpoint: e.userinfo_endpoint,
    // OpenID Connect RP-Initiated Logout 1.0 §2.1
    end_session_endpoint: e.end_session_endpoint,
    jwks_uri: e.jwks_uri,
    grant_types_supported: [AUTHORIZATION_CODE_GRANT, DEVICE_CODE_GRANT, REFRESH_TOKEN_GRANT, CLIENT_CREDENTIALS_GRANT],
    response_types_supported: ['code'],
    response_modes_supported: ['query'],
    code_challenge_methods_supported: ['S256'],
    // RFC 9207: every authorization response names its issuer, against mix-up attacks.
    authorization_response_iss_parameter_supported: true,
    prompt_values_supported: ['none', 'login', 'consent', 'select_account'],
    scopes_supported: [...REGISTRABLE_SCOPES],
    token_endpoint_auth_methods_supported: ['client_secret_basic', 'client_secret_post', 'none'],
    revocation_endpoint_auth_methods_supported: ['client_secret_basic', 'client_secret_post', 'none'],
    introspection_endpoint_auth_methods_supported: ['client_secret_basic', 'client_secret_post'],
    subject_types_supported: ['public'],
    id_token_signing_alg_values_supported: [ID_TOKEN_ALG],
    // RFC 9449 §5.1
    dpop_signing_alg_values_supported: [...DPOP_SIGNING_ALGS],
    claims_supported: ['sub', 'iss', 'aud', 'exp', 'iat', 'auth_time', 'nonce', 'sid', 'name', 'email', 'email_verified'],
    claims_parameter_supported: false,
    request_parameter_supported: false,
    request_uri_parameter_supported: false,
  };
}
