//! The OpenAPI document served at `/openapi.json`: every route Berth serves,
//! by API, with what it does. `crates/berthd/tests/openapi.rs` checks that every route
//! listed here answers, so the document cannot drift into fiction.

use utoipa::openapi::path::{HttpMethod, Operation, OperationBuilder, ParameterBuilder, ParameterIn, Paths};
use utoipa::openapi::request_body::RequestBodyBuilder;
use utoipa::openapi::schema::{ArrayBuilder, Object, ObjectBuilder, Schema, Type};
use utoipa::openapi::{
    Components, ComponentsBuilder, ContentBuilder, InfoBuilder, OpenApi, OpenApiBuilder, Ref, Required, Response,
    ResponseBuilder,
};

use crate::error::Style;

/// One documented operation.
pub struct Route {
    pub method: &'static str,
    pub path: &'static str,
    pub tag: &'static str,
    pub summary: &'static str,
}

const fn r(method: &'static str, path: &'static str, tag: &'static str, summary: &'static str) -> Route {
    Route { method, path, tag, summary }
}

const BERTH: &str = "berth";
const PLACEMENT: &str = "placement";
const LEASES: &str = "leases (Blazar v1)";
const HOSTS: &str = "hosts (Blazar v1)";
const ADDITIONS: &str = "additions";

pub const ROUTES: &[Route] = &[
    r("GET", "/", BERTH, "Version document: the APIs served and their versions"),
    r("GET", "/healthz", BERTH, "The process is up"),
    r("GET", "/readyz", BERTH, "The process can serve: its database answers; how far its clock is from the database's"),
    r("GET", "/openapi.json", BERTH, "This document"),
    // OpenStack Placement, microversions 1.0 to 1.39.
    r("GET", "/placement/", PLACEMENT, "Placement version document"),
    r(
        "GET",
        "/placement/resource_providers",
        PLACEMENT,
        "List providers (name, uuid, member_of, in_tree, resources, required)",
    ),
    r("POST", "/placement/resource_providers", PLACEMENT, "Create a provider"),
    r("GET", "/placement/resource_providers/{uuid}", PLACEMENT, "Show a provider"),
    r("PUT", "/placement/resource_providers/{uuid}", PLACEMENT, "Rename or re-parent a provider"),
    r("DELETE", "/placement/resource_providers/{uuid}", PLACEMENT, "Delete a provider"),
    r("GET", "/placement/resource_providers/{uuid}/inventories", PLACEMENT, "A provider's inventories"),
    r("PUT", "/placement/resource_providers/{uuid}/inventories", PLACEMENT, "Replace a provider's inventories"),
    r("POST", "/placement/resource_providers/{uuid}/inventories", PLACEMENT, "Add one inventory"),
    r("DELETE", "/placement/resource_providers/{uuid}/inventories", PLACEMENT, "Delete all inventories"),
    r("GET", "/placement/resource_providers/{uuid}/inventories/{resource_class}", PLACEMENT, "One inventory"),
    r("PUT", "/placement/resource_providers/{uuid}/inventories/{resource_class}", PLACEMENT, "Update one inventory"),
    r("DELETE", "/placement/resource_providers/{uuid}/inventories/{resource_class}", PLACEMENT, "Delete one inventory"),
    r("GET", "/placement/resource_providers/{uuid}/usages", PLACEMENT, "What a provider holds now, by class"),
    r("GET", "/placement/resource_providers/{uuid}/allocations", PLACEMENT, "Allocations on a provider now"),
    r("GET", "/placement/resource_providers/{uuid}/traits", PLACEMENT, "A provider's traits"),
    r("PUT", "/placement/resource_providers/{uuid}/traits", PLACEMENT, "Replace a provider's traits"),
    r("DELETE", "/placement/resource_providers/{uuid}/traits", PLACEMENT, "Remove a provider's traits"),
    r("GET", "/placement/resource_providers/{uuid}/aggregates", PLACEMENT, "A provider's aggregates"),
    r("PUT", "/placement/resource_providers/{uuid}/aggregates", PLACEMENT, "Replace a provider's aggregates"),
    r("GET", "/placement/resource_classes", PLACEMENT, "List resource classes"),
    r("POST", "/placement/resource_classes", PLACEMENT, "Create a custom resource class"),
    r("GET", "/placement/resource_classes/{name}", PLACEMENT, "Show a resource class"),
    r("PUT", "/placement/resource_classes/{name}", PLACEMENT, "Create (1.7+) a custom resource class"),
    r("DELETE", "/placement/resource_classes/{name}", PLACEMENT, "Delete a custom resource class"),
    r("GET", "/placement/traits", PLACEMENT, "List traits (name, associated)"),
    r("GET", "/placement/traits/{name}", PLACEMENT, "Whether a trait exists"),
    r("PUT", "/placement/traits/{name}", PLACEMENT, "Create a custom trait"),
    r("DELETE", "/placement/traits/{name}", PLACEMENT, "Delete a custom trait"),
    r("GET", "/placement/allocations/{consumer_uuid}", PLACEMENT, "A consumer's allocations"),
    r(
        "PUT",
        "/placement/allocations/{consumer_uuid}",
        PLACEMENT,
        "Replace a consumer's allocations (claim, move, resize) at once",
    ),
    r("DELETE", "/placement/allocations/{consumer_uuid}", PLACEMENT, "Delete a consumer's allocations"),
    r("POST", "/placement/allocations", PLACEMENT, "Replace several consumers' allocations at once"),
    r("GET", "/placement/usages", PLACEMENT, "A project's (or user's) usage now, by class or consumer type"),
    r("POST", "/placement/reshaper", PLACEMENT, "Move inventories and allocations between providers at once"),
    r("GET", "/placement/allocation_candidates", PLACEMENT, "Where a request would fit, now and open-ended"),
    // Blazar v1 leases and hosts.
    r("GET", "/v1/leases", LEASES, "List leases (status, project_id for admins, limit, marker)"),
    r("POST", "/v1/leases", LEASES, "Create a lease: every reservation fits at every instant, or none is taken"),
    r("GET", "/v1/leases/{id}", LEASES, "Show a lease with its reservations and events"),
    r("PUT", "/v1/leases/{id}", LEASES, "Rename, move, extend, shorten or change a lease, re-checked as a whole"),
    r("DELETE", "/v1/leases/{id}", LEASES, "Delete a lease; what it held is free at once"),
    r("GET", "/v1/os-hosts", HOSTS, "List reservable hosts"),
    r("POST", "/v1/os-hosts", HOSTS, "Enrol a host (an existing provider, or a new one with its sizes)"),
    r("GET", "/v1/os-hosts/{id}", HOSTS, "Show a host and its extra capabilities"),
    r("PUT", "/v1/os-hosts/{id}", HOSTS, "Update a host's extra capabilities"),
    r("DELETE", "/v1/os-hosts/{id}", HOSTS, "Remove a host no current or future lease holds"),
    r("GET", "/v1/os-hosts/allocations", HOSTS, "Which leases hold which hosts"),
    r("GET", "/v1/os-hosts/{id}/allocation", HOSTS, "Which leases hold one host"),
    r("GET", "/v1/os-hosts/properties", HOSTS, "The extra capabilities hosts have"),
    r("PATCH", "/v1/os-hosts/properties/{name}", HOSTS, "Make a capability private or public"),
    // Berth's additions.
    r("POST", "/v1/availability", ADDITIONS, "The earliest windows in which a whole lease would fit"),
    r("GET", "/v1/leases/{id}/extension", ADDITIONS, "The latest end a lease could be extended to"),
    r("GET", "/v1/leases/{id}/events", ADDITIONS, "A lease's events: due time, status, attempts, last error, claimer"),
    r("GET", "/v1/events", ADDITIONS, "Lease events (status, event_type, lease_id; limit, marker); own project's"),
    r("GET", "/v1/log", ADDITIONS, "The event log after a cursor, in pages (admin)"),
    r("GET", "/v1/log/stream", ADDITIONS, "The event log live, as Server-Sent Events, resumable (admin)"),
    r("GET", "/metrics", BERTH, "Metrics in Prometheus text format"),
    // Quotas (admins write; members read their own project).
    r("GET", "/v1/quotas/defaults", ADDITIONS, "The default limits"),
    r("PUT", "/v1/quotas/defaults", ADDITIONS, "Set default limits ({\"quotas\": {...}}; -1 unlimited, null removes)"),
    r("GET", "/v1/quotas/projects/{project_id}", ADDITIONS, "A project's limits in effect"),
    r("PUT", "/v1/quotas/projects/{project_id}", ADDITIONS, "Set a project's limits; reports any left over a limit"),
    r("DELETE", "/v1/quotas/projects/{project_id}", ADDITIONS, "Remove a project's limits (back to the defaults)"),
    r("GET", "/v1/quotas/tenants/{project_id}", ADDITIONS, "A project's limits in effect (tenants: an alias)"),
    r("PUT", "/v1/quotas/tenants/{project_id}", ADDITIONS, "Set a project's limits (tenants: an alias)"),
    r("DELETE", "/v1/quotas/tenants/{project_id}", ADDITIONS, "Remove a project's limits (tenants: an alias)"),
    r("GET", "/v1/quotas/projects/{project_id}/usage", ADDITIONS, "Limit, in use and peak per resource (start, end)"),
    r("GET", "/v1/quotas/projects/{project_id}/users/{user_id}", ADDITIONS, "A user's limits in effect"),
    r("PUT", "/v1/quotas/projects/{project_id}/users/{user_id}", ADDITIONS, "Set a user's limits within its project"),
    r("DELETE", "/v1/quotas/projects/{project_id}/users/{user_id}", ADDITIONS, "Remove a user's limits"),
    r("GET", "/v1/quotas/projects/{project_id}/users/{user_id}/usage", ADDITIONS, "A user's usage over a window"),
];

fn method(m: &str) -> HttpMethod {
    match m {
        "GET" => HttpMethod::Get,
        "POST" => HttpMethod::Post,
        "PUT" => HttpMethod::Put,
        "DELETE" => HttpMethod::Delete,
        "PATCH" => HttpMethod::Patch,
        other => unreachable!("undocumented method {other}"),
    }
}

/// The error document of the API `path` belongs to, as a component name.
fn error_schema(path: &str) -> &'static str {
    match Style::of_path(path) {
        Style::Placement => "PlacementError",
        Style::Blazar => "BlazarError",
        Style::Berth => "BerthError",
    }
}

fn string() -> Object {
    ObjectBuilder::new().schema_type(Type::String).build()
}

fn integer() -> Object {
    ObjectBuilder::new().schema_type(Type::Integer).build()
}

/// `{status, title, detail, code, request_id}`, as Placement's and Berth's
/// documents carry each error.
fn error_fields() -> Object {
    ObjectBuilder::new()
        .schema_type(Type::Object)
        .property("status", integer())
        .property("title", string())
        .property("detail", string())
        .property("code", string())
        .property("request_id", string())
        .required("status")
        .required("code")
        .build()
}

/// The three error documents (see `crate::error`).
fn error_components() -> Components {
    let placement = ObjectBuilder::new()
        .schema_type(Type::Object)
        .property("errors", ArrayBuilder::new().items(error_fields()).build())
        .required("errors")
        .build();
    let blazar = ObjectBuilder::new()
        .schema_type(Type::Object)
        .property("error_code", integer())
        .property("error_name", string())
        .property("error_message", string())
        .property("code", string())
        .property("request_id", string())
        .required("error_code")
        .required("code")
        .build();
    let berth =
        ObjectBuilder::new().schema_type(Type::Object).property("error", error_fields()).required("error").build();
    ComponentsBuilder::new()
        .schema("PlacementError", placement)
        .schema("BlazarError", blazar)
        .schema("BerthError", berth)
        .build()
}

/// What a successful answer carries.
fn success(route: &Route) -> Response {
    let content_type = match route.path {
        "/metrics" | "/healthz" => "text/plain",
        "/v1/log/stream" => "text/event-stream",
        _ => "application/json",
    };
    ResponseBuilder::new()
        .description("Success")
        .content(content_type, ContentBuilder::new().schema(Some(Schema::Object(Object::new()))).build())
        .build()
}

/// One operation: its path parameters, a JSON body where it takes one, its
/// success and its error document.
fn operation(route: &Route) -> Operation {
    let mut op = OperationBuilder::new().summary(Some(route.summary)).tag(route.tag);
    for name in route.path.split('/').filter_map(|seg| seg.strip_prefix('{')?.strip_suffix('}')) {
        op = op.parameter(
            ParameterBuilder::new()
                .name(name)
                .parameter_in(ParameterIn::Path)
                .required(Required::True)
                .schema(Some(string())),
        );
    }
    if matches!(route.method, "POST" | "PUT" | "PATCH") {
        let object = ObjectBuilder::new().schema_type(Type::Object).build();
        let body = RequestBodyBuilder::new()
            .content("application/json", ContentBuilder::new().schema(Some(object)).build())
            .build();
        op = op.request_body(Some(body));
    }
    let error = ResponseBuilder::new()
        .description("A refusal, in the error document of the route's API")
        .content(
            "application/json",
            ContentBuilder::new().schema(Some(Ref::from_schema_name(error_schema(route.path)))).build(),
        )
        .build();
    op.response("2XX", success(route)).response("default", error).build()
}

/// The document, built once per call from [`ROUTES`].
pub fn document() -> OpenApi {
    let mut paths = Paths::new();
    for route in ROUTES {
        paths.add_path_operation(route.path, vec![method(route.method)], operation(route));
    }
    let info = InfoBuilder::new()
        .title("Berth")
        .version(env!("CARGO_PKG_VERSION"))
        .description(Some(
            "Lease and reservation scheduler. The OpenStack Placement API under /placement \
             (microversions 1.0-1.39), the Blazar v1 lease API and Berth's additions under /v1. \
             Request and response shapes of the Placement and Blazar parts follow their public API references.",
        ))
        .build();
    OpenApiBuilder::new().info(info).paths(paths).components(Some(error_components())).build()
}
