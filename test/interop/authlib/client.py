"""A relying party and a device written with Debian's python3-authlib 1.2 (and requests), driven
by test/interop/authlib.test.ts. It knows the server from its discovery document alone. One JSON
object per line on stdout: what the user must see (a code, an address), then the outcome. The
secret comes from the environment (CLIENT_SECRET), never the command line.

  client.py device ISSUER CLIENT_ID   device flow; refresh once the access token expired; revocation
  client.py code ISSUER CLIENT_ID AUTH_METHOD REDIRECT_URI
                                      code flow with PKCE; reads the redirect back from stdin
"""
import json
import os
import sys
import time

import requests
from authlib.common.security import generate_token
from authlib.integrations.base_client.errors import OAuthError
from authlib.integrations.requests_client import OAuth2Session
from authlib.jose import JsonWebKey, jwt

DEVICE_GRANT = 'urn:ietf:params:oauth:grant-type:device_code'
TIMEOUT = 15
POLL_BOUND_SECONDS = 60


def say(**fields):
    print(json.dumps(fields), flush=True)


def discover(issuer):
    response = requests.get(f'{issuer}/.well-known/openid-configuration', timeout=TIMEOUT)
    response.raise_for_status()
    metadata = response.json()
    assert metadata['issuer'] == issuer, metadata['issuer']
    return metadata


def session_for(client_id, method, **kwargs):
    secret = os.environ.get('CLIENT_SECRET') or None
    return OAuth2Session(
        client_id,
        secret,
        token_endpoint_auth_method=method,
        revocation_endpoint_auth_method=method,
        default_timeout=TIMEOUT,
        **kwargs,
    )


def device(issuer, client_id):
    metadata = discover(issuer)
    method = 'client_secret_basic' if os.environ.get('CLIENT_SECRET') else 'none'
    session = session_for(client_id, method, scope='openid email offline_access')
    # RFC 8628 §3.1: the device authorization request authenticates as the token request does.
    body = {'scope': 'openid email offline_access'}
    if method == 'none':
        body['client_id'] = client_id
    auth = (client_id, os.environ['CLIENT_SECRET']) if method != 'none' else None
    response = requests.post(metadata['device_authorization_endpoint'], data=body, auth=auth, timeout=TIMEOUT)
    response.raise_for_status()
    flow = response.json()
    say(step='code', user_code=flow['user_code'], verification_uri_complete=flow['verification_uri_complete'],
        confirmation_phrase=flow.get('confirmation_phrase'), interval=flow['interval'])

    # RFC 8628 §3.5: wait the interval between polls, five seconds more after slow_down.
    interval = flow['interval']
    deadline = time.monotonic() + POLL_BOUND_SECONDS
    token = None
    slow_downs = 0
    while token is None and time.monotonic() < deadline:
        time.sleep(interval)
        try:
            token = session.fetch_token(metadata['token_endpoint'], grant_type=DEVICE_GRANT, device_code=flow['device_code'])
        except OAuthError as error:
            if error.error == 'slow_down':
                slow_downs += 1
                interval += 5
            elif error.error != 'authorization_pending':
                raise
    if token is None:
        raise SystemExit('no tokens in time')
    first_access = token['access_token']
    first_refresh = token['refresh_token']
    say(step='tokens', scope=token['scope'], expires_in=token['expires_in'], slow_downs=slow_downs)

    # Once the access token has expired, authlib refreshes by itself before the next request.
    session.metadata['token_endpoint'] = metadata['token_endpoint']
    time.sleep(max(0, token['expires_at'] - time.time()) + 1)
    userinfo = session.get(metadata['userinfo_endpoint'])
    refreshed = session.token
    say(step='refreshed', userinfo_status=userinfo.status_code, sub=userinfo.json().get('sub'),
        new_access_token=refreshed['access_token'] != first_access, new_refresh_token=refreshed['refresh_token'] != first_refresh,
        expired_access_status=requests.get(metadata['userinfo_endpoint'], headers={'Authorization': f'Bearer {first_access}'}, timeout=TIMEOUT).status_code)

    # RFC 7009: revoking the refresh token ends its grant, and the access token with it.
    revoked = session.revoke_token(metadata['revocation_endpoint'], token=refreshed['refresh_token'], token_type_hint='refresh_token')
    after_revocation = requests.get(metadata['userinfo_endpoint'], headers={'Authorization': f"Bearer {refreshed['access_token']}"}, timeout=TIMEOUT)
    try:
        session.refresh_token(metadata['token_endpoint'], refresh_token=refreshed['refresh_token'])
        refresh_after = 'accepted'
    except OAuthError as error:
        refresh_after = error.error
    say(step='revoked', revocation_status=revoked.status_code, userinfo_status=after_revocation.status_code, refresh=refresh_after)


def code(issuer, client_id, method, redirect_uri):
    metadata = discover(issuer)
    session = session_for(client_id, method, scope='openid email', redirect_uri=redirect_uri, code_challenge_method='S256')
    verifier = generate_token(48)
    nonce = generate_token(20)
    url, state = session.create_authorization_url(metadata['authorization_endpoint'], code_verifier=verifier, nonce=nonce)
    say(step='authorize', url=url)
    redirect = sys.stdin.readline().strip()
    token = session.fetch_token(metadata['token_endpoint'], authorization_response=redirect, state=state, code_verifier=verifier)
    keys = JsonWebKey.import_key_set(requests.get(metadata['jwks_uri'], timeout=TIMEOUT).json())
    claims = jwt.decode(token['id_token'], keys, claims_options={
        'iss': {'essential': True, 'value': issuer},
        'aud': {'essential': True, 'value': client_id},
        'nonce': {'essential': True, 'value': nonce},
    })
    claims.validate()
    userinfo = session.get(metadata['userinfo_endpoint'])
    revoked = session.revoke_token(metadata['revocation_endpoint'], token=token['access_token'], token_type_hint='access_token')
    after = requests.get(metadata['userinfo_endpoint'], headers={'Authorization': f"Bearer {token['access_token']}"}, timeout=TIMEOUT)
    say(step='signed_in', sub=claims['sub'], email=claims.get('email'), userinfo_status=userinfo.status_code,
        revocation_status=revoked.status_code, userinfo_after_revocation=after.status_code)


if __name__ == '__main__':
    mode, *arguments = sys.argv[1:]
    {'device': device, 'code': code}[mode](*arguments)
