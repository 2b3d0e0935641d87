import { SUPPORTED_SCOPES } from './scopes.js';
import { ID_TOKEN_ALG } from './keys.js';

export const DEVICE_CODE_GRANT = 'urn:ietf:params:oauth:grant-type:device_code';
export const REFRESH_TOKEN_GRANT = 'refresh_token';

export function endpoints(issuer: string) {
  return {
    device_authorization_endpoint: `${issuer}/oauth/device/code`,
    token_endpoint: `${issuer}/oauth/token`,
    revocation_endpoint: `${issuer}/oauth/revoke`,
    introspection_endpoint: `${issuer}/oauth/introspect`,
    userinfo_endpoint: `${issuer}/oauth/userinfo`,
    jwks_uri: `${issuer}/.well-known/jwks.json`,
    activate: `${issuer}/activate`,
    activateBot: `${issuer}/activate/bot`,
  };
}

/**
 * RFC 8414 authorization server metadata, also served as OpenID Connect Discovery 1.0.
 * There is no authorization endpoint: tokens come only from the device flow and refresh.
 */
export function serverMetadata(issuer: string) {
  const e = endpoints(issuer);
  return {
    issuer,
    device_authorization_endpoint: e.device_authorization_endpoint,
    token_endpoint: e.token_endpoint,
    revocation_endpoint: e.revocation_endpoint,
    introspection_endpoint: e.introspection_endpoint,
    userinfo_endpoint: e.userinfo_endpoint,
    jwks_uri: e.jwks_uri,
    grant_types_supported: [DEVICE_CODE_GRANT, REFRESH_TOKEN_GRANT],
    response_types_supported: [],
    scopes_supported: [...SUPPORTED_SCOPES],
    token_endpoint_auth_methods_supported: ['client_secret_basic', 'none'],
    revocation_endpoint_auth_methods_supported: ['client_secret_basic', 'none'],
    introspection_endpoint_auth_methods_supported: ['client_secret_basic'],
    subject_types_supported: ['public'],
    id_token_signing_alg_values_supported: [ID_TOKEN_ALG],
    claims_supported: ['sub', 'iss', 'aud', 'exp', 'iat', 'auth_time', 'name', 'email', 'email_verified'],
    claims_parameter_supported: false,
    request_parameter_supported: false,
    request_uri_parameter_supported: false,
  };
}
