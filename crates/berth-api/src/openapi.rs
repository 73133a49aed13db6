//! The OpenAPI document served at `/openapi.json`, derived from the
//! handlers: each carries its `#[utoipa::path]` (path, parameters, request
//! body, success answers) and each API module gathers its own into a
//! document ([`crate::placement::openapi`] and the like). Here they are
//! merged, and every operation gets the error document its path speaks, by
//! the same [`Style::of_path`] that picks the document of a refusal at run
//! time.
//!
//! Where an answer depends on the Placement microversion, its schema
//! describes the latest shape, with the fields older versions leave out (or
//! add) optional; no schema denies unknown fields, so every version's
//! answer matches. `make fuzz` checks every answer against its schema.

use utoipa::openapi::header::{Header, HeaderBuilder};
use utoipa::openapi::path::{HttpMethod, Operation, Parameter, ParameterBuilder, ParameterIn};
use utoipa::openapi::{
    ContentBuilder, InfoBuilder, ObjectBuilder, OpenApi, Ref, RefOr, Required, Response, ResponseBuilder, Type,
};

use crate::error::{BerthError, BlazarError, ErrorFields, PlacementError, Style};
use crate::tags;

#[cfg(test)]
pub(crate) mod examples;

#[derive(utoipa::OpenApi)]
#[openapi(components(schemas(ErrorFields, PlacementError, BlazarError, BerthError)))]
struct Errors;

/// The error document of the API `path` belongs to, as a component name.
fn error_schema(path: &str) -> &'static str {
    match Style::of_path(path) {
        Style::Placement => "PlacementError",
        Style::Blazar => "BlazarError",
        Style::Berth => "BerthError",
    }
}

fn refusal(path: &str) -> Response {
    ResponseBuilder::new()
        .description("A refusal, in the error document of the route's API")
        .content(
            "application/json",
            ContentBuilder::new().schema(Some(Ref::from_schema_name(error_schema(path)))).build(),
        )
        .build()
}

/// A write's success answer: the read-your-write token (`crate::reads`).
fn read_after_header() -> Header {
    HeaderBuilder::new()
        .schema(ObjectBuilder::new().schema_type(Type::String))
        .description(Some(
            "Where standbys serve reads: the primary's WAL position once this write committed. \
             Send it back on a GET to read this write.",
        ))
        .build()
}

/// A GET's optional read-your-write token (`crate::reads`).
fn read_after_parameter() -> Parameter {
    ParameterBuilder::new()
        .name(crate::reads::READ_AFTER)
        .parameter_in(ParameterIn::Header)
        .required(Required::False)
        .schema(Some(ObjectBuilder::new().schema_type(Type::String)))
        .description(Some(
            "A write's berth-read-after token: a standby serves this read only once it has replayed that \
             write; otherwise the primary does.",
        ))
        .build()
}

/// Declares the read-your-write token where `crate::reads` sends or reads
/// it: a header of every write's success answers, a parameter of every GET.
fn declare_read_after(method: &HttpMethod, op: &mut Operation) {
    if matches!(method, HttpMethod::Get) {
        op.parameters.get_or_insert_with(Vec::new).push(read_after_parameter());
        return;
    }
    for (status, response) in op.responses.responses.iter_mut() {
        if let (true, RefOr::T(r)) = (status.starts_with('2'), response) {
            r.headers.insert(crate::reads::READ_AFTER.to_string(), read_after_header());
        }
    }
}

/// The operations of `item`, with their methods.
fn operations(item: &mut utoipa::openapi::PathItem) -> Vec<(HttpMethod, &mut Operation)> {
    [
        (HttpMethod::Get, item.get.as_mut()),
        (HttpMethod::Put, item.put.as_mut()),
        (HttpMethod::Post, item.post.as_mut()),
        (HttpMethod::Delete, item.delete.as_mut()),
        (HttpMethod::Patch, item.patch.as_mut()),
    ]
    .into_iter()
    .filter_map(|(m, op)| Some((m, op?)))
    .collect()
}

fn method_name(m: &HttpMethod) -> &'static str {
    match m {
        HttpMethod::Get => "get",
        HttpMethod::Put => "put",
        HttpMethod::Post => "post",
        HttpMethod::Delete => "delete",
        HttpMethod::Patch => "patch",
        HttpMethod::Head => "head",
        HttpMethod::Options => "options",
        HttpMethod::Trace => "trace",
    }
}

/// `/openapi.json`: served beside what it describes, so that no handler
/// module needs this one.
pub(crate) fn router() -> axum::Router<crate::AppState> {
    axum::Router::new().route("/openapi.json", axum::routing::get(openapi_json))
}

/// The OpenAPI document of every route.
#[utoipa::path(
    get,
    path = "/openapi.json",
    tag = tags::BERTH,
    summary = "This document",
    responses(
        (status = 200, description = "The OpenAPI 3.1 document", body = Object),
    ),
)]
async fn openapi_json() -> axum::Json<OpenApi> {
    axum::Json(document())
}

/// The document, built once per call from the handlers' declarations.
pub fn document() -> OpenApi {
    #[derive(utoipa::OpenApi)]
    #[openapi(paths(openapi_json))]
    struct Own;
    let mut doc = <Errors as utoipa::OpenApi>::openapi();
    doc.merge(<Own as utoipa::OpenApi>::openapi());
    doc.merge(crate::root::openapi());
    doc.merge(crate::placement::openapi());
    doc.merge(crate::blazar::openapi());
    doc.merge(crate::events::openapi());
    doc.merge(crate::controls::openapi());
    doc.merge(crate::events_stream::openapi());
    doc.merge(crate::log::openapi());
    doc.merge(crate::quotas::openapi());
    doc.merge(crate::metrics::openapi());
    doc.merge(crate::console::openapi());
    for (path, item) in doc.paths.paths.iter_mut() {
        for (method, op) in operations(item) {
            op.responses.responses.insert("default".into(), refusal(path).into());
            declare_read_after(&method, op);
            // Handlers of different APIs share names (`list`, `show`): the
            // method and path make an id that is unique.
            let slug: String =
                path.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).collect::<String>();
            op.operation_id = Some(format!("{}{}", method_name(&method), slug.trim_end_matches('_')));
        }
    }
    doc.info = InfoBuilder::new()
        .title("Berth")
        .version(env!("CARGO_PKG_VERSION"))
        .description(Some(
            "Lease and reservation scheduler. The OpenStack Placement API under /placement \
             (microversions 1.0-1.39), the Blazar v1 lease API and Berth's additions under /v1. \
             Request and response shapes of the Placement and Blazar parts follow their public API references; \
             where a Placement answer depends on the microversion, the schema is the latest one's, \
             with what other versions leave out optional.",
        ))
        .build();
    doc
}

/// Every documented operation, as `(METHOD, path)`.
pub fn routes() -> Vec<(String, String)> {
    let mut doc = document();
    let mut out = Vec::new();
    for (path, item) in doc.paths.paths.iter_mut() {
        for (method, _) in operations(item) {
            out.push((method_name(&method).to_uppercase(), path.clone()));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    /// Every GET declares the read-your-write token it may send, and every
    /// write's success answers the token they carry.
    #[test]
    fn reads_and_writes_declare_the_read_after_token() {
        let doc = serde_json::to_value(super::document()).unwrap();
        let mut writes = 0;
        for (path, item) in doc["paths"].as_object().unwrap() {
            for (method, op) in item.as_object().unwrap() {
                if method == "get" {
                    let params = op["parameters"].as_array().unwrap_or_else(|| panic!("GET {path}"));
                    assert!(
                        params.iter().any(|p| p["name"] == "berth-read-after" && p["in"] == "header"),
                        "GET {path}"
                    );
                    continue;
                }
                for (status, answer) in op["responses"].as_object().unwrap() {
                    if status.starts_with('2') {
                        assert!(answer["headers"]["berth-read-after"].is_object(), "{method} {path} {status}");
                        writes += 1;
                    }
                }
            }
        }
        assert!(writes > 20, "only {writes} write answers");
    }

    /// Every paged list declares the paging parameters its handler reads.
    #[test]
    fn paged_lists_declare_limit_and_marker() {
        let doc = serde_json::to_value(super::document()).unwrap();
        let paged = [
            "/v1/leases",
            "/v1/os-hosts",
            "/v1/os-hosts/allocations",
            "/v1/os-hosts/properties",
            "/v1/events",
            "/v1/leases/{id}/events",
        ];
        for path in paged {
            let params = doc["paths"][path]["get"]["parameters"].as_array().unwrap_or_else(|| panic!("{path}"));
            let named = |name: &str| params.iter().find(|p| p["name"] == name && p["in"] == "query");
            let limit = named("limit").unwrap_or_else(|| panic!("{path} declares no limit"));
            assert_eq!(limit["schema"]["minimum"], 1, "{path}: {limit}");
            assert!(named("marker").is_some(), "{path} declares no marker");
        }
    }
}
