//! The console's login: `GET /v1/login` says how a user may log in here,
//! `POST /v1/login` asks Keystone for a token on a user's behalf (keystone
//! mode only; the answer is never stored by a cache), and `GET /v1/whoami`
//! says who a token is and which pages the rules open to it.

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use berth_core::dates::format_date;
use berth_core::error::ErrorCode;
use serde::Deserialize;

use crate::access::{Action, Target};
use crate::auth::login::{self, Credentials};
use crate::auth::{AuthMode, Authenticator, Context, MaybeAnonymous};
use crate::error::ApiError;
use crate::tags;
use crate::AppState;

/// Code of a password login where berthd does not take one (404).

#[derive(serde::Serialize, utoipa::ToSchema)]
struct Methods {
    /// noauth, keystone or jwt.
    auth: String,
    /// "token", and "password" where berthd asks Keystone.
    methods: Vec<String>,
}

#[derive(serde::Serialize, utoipa::ToSchema)]
pub(super) struct MethodsDoc {
    login: Methods,
}

/// The body of a login.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
struct LoginBody {
    user: String,
    password: String,
    project: String,
    /// Default "Default".
    user_domain: Option<String>,
    /// Default "Default".
    project_domain: Option<String>,
}

#[derive(serde::Serialize, utoipa::ToSchema)]
struct Issued {
    /// The token to send as `X-Auth-Token`.
    token: String,
    expires_at: String,
    user_id: String,
    project_id: String,
}

#[derive(serde::Serialize, utoipa::ToSchema)]
struct IssuedDoc {
    login: Issued,
}

#[derive(serde::Serialize, utoipa::ToSchema)]
struct Whoami {
    user_id: String,
    project_id: String,
    /// May see every project's leases and events (names in the calendar).
    all_projects: bool,
    /// May read the event log (the live log page).
    read_log: bool,
    /// Which of the console's controls to show: each is the rule its route
    /// checks, asked for the caller's own project (an admin's rule passes
    /// for every project). The route still decides each request.
    may: std::collections::BTreeMap<String, bool>,
}

/// The console's controls, each with the one rule its route checks.
const CONTROLS: &[(&str, Action)] = &[
    ("lease_create", Action::LeasesCreate),
    ("lease_update", Action::LeasesUpdate),
    ("lease_delete", Action::LeasesDelete),
    ("lease_end", Action::LeasesEnd),
    ("lease_recover", Action::LeasesRecover),
    ("lease_share", Action::LeasesShare),
    ("lease_transfer", Action::LeasesTransfer),
    ("lease_withdraw_transfer", Action::LeasesWithdrawTransfer),
    ("availability", Action::Availability),
    ("events_fire", Action::EventsFire),
    ("events_cancel", Action::EventsCancel),
    ("events_retry", Action::EventsRetry),
    ("manager_get", Action::ManagerGet),
    ("manager_update", Action::ManagerUpdate),
    ("hosts_list", Action::HostsList),
    ("hosts_update", Action::HostsUpdate),
    ("maintenance_list", Action::MaintenanceList),
    ("loans_list", Action::LoansList),
    ("maintenance_create", Action::MaintenanceCreate),
];

#[derive(serde::Serialize, utoipa::ToSchema)]
pub(super) struct WhoamiDoc {
    whoami: Whoami,
}

#[utoipa::path(
    get,
    path = "/v1/login",
    tag = tags::ADDITIONS,
    summary = "How one logs in to this berthd (token; password where it asks Keystone)",
    responses(
        (status = 200, description = "The ways in", body = MethodsDoc),
    ),
)]
pub(super) async fn methods(
    State(state): State<AppState>,
    MaybeAnonymous(ctx): MaybeAnonymous,
) -> Result<Json<MethodsDoc>, ApiError> {
    state.rules.authorize(&ctx, Action::Login, &Target::own(&ctx))?;
    let mode = state.auth.mode();
    let mut methods = vec!["token".to_string()];
    if mode == AuthMode::Keystone {
        methods.push("password".into());
    }
    Ok(Json(MethodsDoc { login: Methods { auth: mode.as_str().into(), methods } }))
}

fn bad(m: impl Into<String>) -> ApiError {
    ApiError::bad_request(ErrorCode::Invalid, m)
}

#[utoipa::path(
    post,
    path = "/v1/login",
    tag = tags::ADDITIONS,
    summary = "A Keystone token for a user, password and project (keystone mode)",
    request_body = LoginBody,
    responses(
        (status = 200, description = "The token, not to be cached", body = IssuedDoc),
    ),
)]
pub(super) async fn login(
    State(state): State<AppState>,
    MaybeAnonymous(ctx): MaybeAnonymous,
    body: Bytes,
) -> Result<Response, ApiError> {
    state.rules.authorize(&ctx, Action::Login, &Target::own(&ctx))?;
    let b = login_body(&body)?;
    let Authenticator::Keystone(k) = state.auth.as_ref() else {
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            ErrorCode::LoginUnavailable,
            format!("this berthd ({} mode) takes tokens only", state.auth.mode().as_str()),
        ));
    };
    match k.login(&b.credentials()).await {
        Ok(issued) => Ok(issued_response(issued)),
        // 401 for refused credentials, 503 with Retry-After when Keystone is down.
        Err(f) => Ok(state.auth.reject(f).into_response()),
    }
}

/// A login's body, each of its three names given.
fn login_body(body: &[u8]) -> Result<LoginBody, ApiError> {
    let b: LoginBody = serde_json::from_slice(body).map_err(|e| bad(format!("a login body: {e}")))?;
    for (k, v) in [("user", &b.user), ("password", &b.password), ("project", &b.project)] {
        if v.is_empty() {
            return Err(bad(format!("{k} must not be empty")));
        }
    }
    Ok(b)
}

impl LoginBody {
    fn credentials(&self) -> Credentials<'_> {
        Credentials {
            user: &self.user,
            password: &self.password,
            project: &self.project,
            user_domain: self.user_domain.as_deref().unwrap_or("Default"),
            project_domain: self.project_domain.as_deref().unwrap_or("Default"),
        }
    }
}

/// The token Keystone issued, which no cache between here and the browser
/// may keep.
fn issued_response(issued: login::Issued) -> Response {
    let doc = IssuedDoc {
        login: Issued {
            token: issued.token,
            expires_at: format_date(issued.expires_at),
            user_id: issued.user_id,
            project_id: issued.project_id,
        },
    };
    let no_store = [
        (header::CACHE_CONTROL, HeaderValue::from_static("no-store")),
        (header::PRAGMA, HeaderValue::from_static("no-cache")),
    ];
    (no_store, Json(doc)).into_response()
}

#[utoipa::path(
    get,
    path = "/v1/whoami",
    tag = tags::ADDITIONS,
    summary = "Who the token is, and which pages and controls the rules open to it",
    responses(
        (status = 200, description = "The caller", body = WhoamiDoc),
    ),
)]
pub(super) async fn whoami(State(state): State<AppState>, ctx: Context) -> Result<Json<WhoamiDoc>, ApiError> {
    state.rules.authorize(&ctx, Action::Whoami, &Target::own(&ctx))?;
    let own = Target::own(&ctx);
    let all_projects = state.rules.allows(&ctx, Action::LeasesGetAllProjects, &own);
    let read_log = state.rules.allows(&ctx, Action::LogRead, &own);
    let may = CONTROLS.iter().map(|&(k, a)| (k.to_string(), state.rules.allows(&ctx, a, &own))).collect();
    Ok(Json(WhoamiDoc {
        whoami: Whoami {
            user_id: ctx.user_id.clone(),
            project_id: ctx.project_id.clone(),
            all_projects,
            read_log,
            may,
        },
    }))
}
