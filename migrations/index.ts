import type { Migration } from 'kysely';
import * as initial from './2026-11-21T21-00-00_initial.js';
import * as oneCurrentRefreshToken from './2026-11-21T22-00-00_one_current_refresh_token.js';
import * as rateLimits from './2026-11-21T22-30-00_rate_limits.js';
import * as pollInOneUpdate from './2026-11-22T00-00-00_poll_in_one_update.js';
import * as fewerWritesPerRequest from './2026-11-22T01-00-00_fewer_writes_per_request.js';
import * as currentRefreshTokenOnLink from './2026-11-22T02-00-00_current_refresh_token_on_link.js';
import * as accessTokensNameTheirUserAndApp from './2026-11-22T03-00-00_access_tokens_name_their_user_and_app.js';
import * as oneRequestPerUserCode from './2026-11-22T04-00-00_one_request_per_user_code.js';
import * as bannedUsersKeepNoAccessTokens from './2026-11-23T00-00-00_banned_users_keep_no_access_tokens.js';
import * as deviceRequestsDoNotLockTheirApp from './2026-11-23T12-00-00_device_requests_do_not_lock_their_app.js';
import * as chainRowsDoNotRecheckTheirLink from './2026-11-23T13-00-00_chain_rows_do_not_recheck_their_link.js';
import * as introspectionIsAPermission from './2026-11-24T00-00-00_introspection_is_a_permission.js';
import * as aRotatedSecretMayOverlap from './2026-11-24T01-00-00_a_rotated_secret_may_overlap.js';
import * as clientChangesAreAnnounced from './2026-11-24T02-00-00_client_changes_are_announced.js';
import * as platformIconsAreOurs from './2026-11-24T03-00-00_platform_icons_are_ours.js';
import * as requestsRememberWhereTheyCameFrom from './2026-11-24T04-00-00_requests_remember_where_they_came_from.js';
import * as decisionsRecordWhereBothSidesWere from './2026-11-24T05-00-00_decisions_record_where_both_sides_were.js';
import * as whatAnAppMayDoIsRegistered from './2026-11-24T06-00-00_what_an_app_may_do_is_registered.js';
import * as aChainIsAGrant from './2026-11-24T07-00-00_a_chain_is_a_grant.js';
import * as webAppsSignInWithACode from './2026-11-24T08-00-00_web_apps_sign_in_with_a_code.js';
import * as signingKeysRotateAndAreSealed from './2026-11-24T09-00-00_signing_keys_rotate_and_are_sealed.js';
import * as dpopBindsTokensToAKey from './2026-11-24T09-30-00_dpop_binds_tokens_to_a_key.js';
import * as devicesThatShowNoPhrase from './2026-11-26T01-00-00_devices_that_show_no_phrase.js';
import * as theRedeemerIsJudgedLikeTheRequest from './2026-11-26T08-00-00_the_redeemer_is_judged_like_the_request.js';
import * as appsRegisterWhereSignOutReturns from './2026-11-26T09-00-00_apps_register_where_sign_out_returns.js';
import * as platformIconsAreBounded from './2026-11-26T09-00-00_platform_icons_are_bounded.js';
import * as grantsRememberTheirOrigin from './2026-11-26T12-00-00_grants_remember_their_origin.js';
import * as devicePolicyIsData from './2026-11-26T12-30-00_device_policy_is_data.js';
import * as oneEventLogForEveryChange from './2026-11-26T14-00-00_one_event_log_for_every_change.js';
import * as deliveriesLeaveInOrderAndRetry from './2026-11-26T14-20-00_deliveries_leave_in_order_and_retry.js';
import * as webhooksAreRegisteredWithASealedSecret from './2026-11-26T14-21-00_webhooks_are_registered_with_a_sealed_secret.js';
import * as appsActForThemselvesWithClientCredentials from './2026-11-26T14-30-00_apps_act_for_themselves_with_client_credentials.js';
import * as sharedSignalsStreams from './2026-11-26T14-31-00_shared_signals_streams.js';
import * as rowRulesRunWhenTheirColumnsAreWritten from './2026-11-26T18-40-00_row_rules_run_when_their_columns_are_written.js';
import * as eventsIndexOnlyWhatTheyName from './2026-11-26T18-50-00_events_index_only_what_they_name.js';
import * as appTokensMayBeBoundToADpopKey from './2026-11-27T17-00-00_app_tokens_may_be_bound_to_a_dpop_key.js';

/**
 * Every migration, by name, in order. A static list (rather than reading the folder) works the
 * same under tsx, vitest and the compiled build.
 */
export const migrations: Record<string, Migration> = {
  '2026-11-21T21-00-00_initial': initial,
  '2026-11-21T22-00-00_one_current_refresh_token': oneCurrentRefreshToken,
  '2026-11-21T22-30-00_rate_limits': rateLimits,
  '2026-11-22T00-00-00_poll_in_one_update': pollInOneUpdate,
  '2026-11-22T01-00-00_fewer_writes_per_request': fewerWritesPerRequest,
  '2026-11-22T02-00-00_current_refresh_token_on_link': currentRefreshTokenOnLink,
  '2026-11-22T03-00-00_access_tokens_name_their_user_and_app': accessTokensNameTheirUserAndApp,
  '2026-11-22T04-00-00_one_request_per_user_code': oneRequestPerUserCode,
  '2026-11-23T00-00-00_banned_users_keep_no_access_tokens': bannedUsersKeepNoAccessTokens,
  '2026-11-23T12-00-00_device_requests_do_not_lock_their_app': deviceRequestsDoNotLockTheirApp,
  '2026-11-23T13-00-00_chain_rows_do_not_recheck_their_link': chainRowsDoNotRecheckTheirLink,
  '2026-11-24T00-00-00_introspection_is_a_permission': introspectionIsAPermission,
  '2026-11-24T01-00-00_a_rotated_secret_may_overlap': aRotatedSecretMayOverlap,
  '2026-11-24T02-00-00_client_changes_are_announced': clientChangesAreAnnounced,
  '2026-11-24T03-00-00_platform_icons_are_ours': platformIconsAreOurs,
  '2026-11-24T04-00-00_requests_remember_where_they_came_from': requestsRememberWhereTheyCameFrom,
  '2026-11-24T05-00-00_decisions_record_where_both_sides_were': decisionsRecordWhereBothSidesWere,
  '2026-11-24T06-00-00_what_an_app_may_do_is_registered': whatAnAppMayDoIsRegistered,
  '2026-11-24T07-00-00_a_chain_is_a_grant': aChainIsAGrant,
  '2026-11-24T08-00-00_web_apps_sign_in_with_a_code': webAppsSignInWithACode,
  '2026-11-24T09-00-00_signing_keys_rotate_and_are_sealed': signingKeysRotateAndAreSealed,
  '2026-11-24T09-30-00_dpop_binds_tokens_to_a_key': dpopBindsTokensToAKey,
  '2026-11-26T01-00-00_devices_that_show_no_phrase': devicesThatShowNoPhrase,
  '2026-11-26T08-00-00_the_redeemer_is_judged_like_the_request': theRedeemerIsJudgedLikeTheRequest,
  '2026-11-26T09-00-00_apps_register_where_sign_out_returns': appsRegisterWhereSignOutReturns,
  '2026-11-26T09-00-00_platform_icons_are_bounded': platformIconsAreBounded,
  '2026-11-26T12-00-00_grants_remember_their_origin': grantsRememberTheirOrigin,
  '2026-11-26T12-30-00_device_policy_is_data': devicePolicyIsData,
  '2026-11-26T14-00-00_one_event_log_for_every_change': oneEventLogForEveryChange,
  '2026-11-26T14-20-00_deliveries_leave_in_order_and_retry': deliveriesLeaveInOrderAndRetry,
  '2026-11-26T14-21-00_webhooks_are_registered_with_a_sealed_secret': webhooksAreRegisteredWithASealedSecret,
  '2026-11-26T14-30-00_apps_act_for_themselves_with_client_credentials': appsActForThemselvesWithClientCredentials,
  '2026-11-26T14-31-00_shared_signals_streams': sharedSignalsStreams,
  '2026-11-26T18-40-00_row_rules_run_when_their_columns_are_written': rowRulesRunWhenTheirColumnsAreWritten,
  '2026-11-26T18-50-00_events_index_only_what_they_name': eventsIndexOnlyWhatTheyName,
  '2026-11-27T17-00-00_app_tokens_may_be_bound_to_a_dpop_key': appTokensMayBeBoundToADpopKey,
};
