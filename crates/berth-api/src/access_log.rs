//! The access log: one line per request (target `berth::access`), through
//! tower-http's tracing layer. Each request runs in a span carrying its
//! method, matched route, request id and, once authenticated, its project
//! and user, so every line logged while serving it carries them too, error
//! lines included.

use std::time::Duration;

use axum::extract::MatchedPath;
use axum::http::{Request, Response};
use tower_http::classify::{ServerErrorsAsFailures, SharedClassifier};
use tower_http::trace::{MakeSpan, OnResponse, TraceLayer};
use tracing::Span;

/// The target of the access lines (`BERTH_LOG=warn,berth::access=info`
/// keeps them while quietening the rest).
pub const TARGET: &str = "berth::access";

/// The route of a request no route matched (never the raw path: paths are
/// the caller's and unbounded).
pub const UNMATCHED: &str = "unmatched";

/// The request's id, put in its extensions by [`crate::error::request_id`].
#[derive(Debug, Clone)]
pub struct RequestId(pub String);

/// The route template that matched `req` (`/v1/leases/{lease_id}`).
pub fn route_of<B>(req: &Request<B>) -> &str {
    req.extensions().get::<MatchedPath>().map_or(UNMATCHED, MatchedPath::as_str)
}

/// The layer that opens each request's span and writes its access line.
pub fn layer() -> TraceLayer<SharedClassifier<ServerErrorsAsFailures>, RequestSpan, (), AccessLine, (), (), ()> {
    TraceLayer::new_for_http()
        .make_span_with(RequestSpan)
        .on_request(())
        .on_response(AccessLine)
        .on_body_chunk(())
        .on_eos(())
        // The access line has the status; the error's own line its cause.
        .on_failure(())
}

#[derive(Debug, Clone, Copy)]
pub struct RequestSpan;

impl<B> MakeSpan<B> for RequestSpan {
    fn make_span(&mut self, req: &Request<B>) -> Span {
        let id = req.extensions().get::<RequestId>().map_or("", |r| r.0.as_str());
        // At ERROR level so that the span (and so the request id on every
        // line) exists whatever BERTH_LOG keeps: a span's level decides
        // whether it is recorded at all.
        tracing::error_span!(
            "request",
            method = %req.method(),
            route = route_of(req),
            request_id = id,
            project = tracing::field::Empty,
            user = tracing::field::Empty,
        )
    }
}

/// Records the caller on the current request's span (called once a
/// request is authenticated).
pub fn record_caller(project: &str, user: &str) {
    let span = Span::current();
    span.record("project", project);
    span.record("user", user);
}

#[derive(Debug, Clone, Copy)]
pub struct AccessLine;

impl<B> OnResponse<B> for AccessLine {
    fn on_response(self, resp: &Response<B>, latency: Duration, _span: &Span) {
        // tower-http calls this inside the request's span.
        tracing::info!(
            target: TARGET,
            status = resp.status().as_u16(),
            duration_ms = latency.as_secs_f64() * 1000.0,
            "request"
        );
    }
}
