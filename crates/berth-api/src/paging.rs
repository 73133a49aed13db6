//! Pages of a list, as OpenStack APIs page: `limit` (at most the server's
//! `max_page`, which is also the default) and `marker` (the last item of
//! the previous page) in the query, and `<name>_links` with a `next` link
//! in the answer when the page is full. Blazar's own lists asked neither
//! answer the whole list instead, as Blazar does ([`crate::whole`]).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{FromRequestParts, Query};
use axum::http::request::Parts;
use axum::http::StatusCode;
use berth_core::error::ErrorCode;
use serde_json::{json, Value};

use crate::config::ApiConfig;
use crate::error::ApiError;
use crate::whole::Whole;

/// A paged list's query: every parameter as given, with the server's most
/// per page. The page is read by [`Listing::page`] after the handler's
/// policy check, so a caller the policy refuses hears that first.
pub struct Listing {
    pub query: HashMap<String, String>,
    max_page: usize,
    /// When the request timeout, counted from now, ends.
    deadline: tokio::time::Instant,
}

/// What a request asks of one of Blazar's lists.
pub enum Ask {
    /// `limit` or `marker` given: that page, linked to the next.
    Page(Page),
    /// Neither: all of it.
    Whole(Whole),
}

impl Listing {
    /// `limit` and `marker` (see [`Page::of`]).
    pub fn page(&self) -> Result<Page, ApiError> {
        Page::of(&self.query, self.max_page)
    }

    /// A page when `limit` or `marker` is given, else the whole list.
    pub fn ask(&self) -> Result<Ask, ApiError> {
        if self.query.contains_key("limit") || self.query.contains_key("marker") {
            return Ok(Ask::Page(self.page()?));
        }
        Ok(Ask::Whole(Whole::new(self.max_page, self.deadline)))
    }
}

impl<S: Send + Sync> FromRequestParts<S> for Listing {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let config = parts.extensions.get::<Arc<ApiConfig>>().cloned().ok_or_else(|| {
            ApiError::from(berth_core::Error::internal("the API's configuration is not installed on the router"))
        })?;
        let Query(query) = Query::<HashMap<String, String>>::from_request_parts(parts, state)
            .await
            .map_err(|e| ApiError::bad_request(ErrorCode::BadEncoding, e.body_text()))?;
        // A year caps a configured timeout so the sum cannot overflow.
        let timeout = Duration::from_secs(config.request_timeout_s.min(365 * 86_400));
        let deadline = tokio::time::Instant::now().checked_add(timeout).expect("a year from now is a time");
        Ok(Listing { query, max_page: config.max_page, deadline })
    }
}

/// What one request asks of a list: `limit` and `marker` as [`Page::of`]
/// reads them from the query, and as the OpenAPI document declares them on
/// every paged list (`params(crate::paging::Page)`).
#[derive(Debug, Clone, PartialEq, Eq, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct Page {
    /// At most this many (the server's maximum, 1,000 by default). Blazar's
    /// lists asked neither `limit` nor `marker` answer all of it, as Blazar
    /// does; Berth's own lists then answer one page of the maximum
    // The query gives a whole number from 1, or nothing (the maximum).
    #[param(value_type = Option<u32>, minimum = 1)]
    pub limit: usize,
    /// The last item of the previous page
    pub marker: Option<String>,
}

impl Page {
    /// `limit` and `marker` from the query; a limit over `max` is `max`.
    pub fn of(q: &HashMap<String, String>, max: usize) -> Result<Page, ApiError> {
        let limit = match q.get("limit") {
            None => max,
            Some(l) => match l.trim().parse::<usize>() {
                Ok(n) if n >= 1 => n.min(max),
                _ => {
                    return Err(ApiError::new(
                        StatusCode::BAD_REQUEST,
                        ErrorCode::BadLimit,
                        format!("limit {l:?} must be a whole number from 1 (at most {max} are given)"),
                    ))
                }
            },
        };
        Ok(Page { limit, marker: q.get("marker").cloned() })
    }

    /// The limit as SQL takes it.
    pub fn sql_limit(&self) -> i64 {
        i64::try_from(self.limit).unwrap_or(i64::MAX)
    }

    /// `{"<name>": items, "<name>_links": [next]}`: a next link (see
    /// [`Page::next`]) after the last item's `id_key` when the page is full.
    pub fn answer(
        &self,
        name: &str,
        path: &str,
        q: &HashMap<String, String>,
        items: Vec<Value>,
        id_key: &str,
    ) -> Value {
        let last = items.last().and_then(|i| i.get(id_key));
        let last = last.map(|m| m.as_str().map(str::to_string).unwrap_or_else(|| m.to_string()));
        let next = self.next(path, q, items.len(), last.as_deref());
        let mut out = json!({ name: items });
        if let Some(href) = next {
            out[format!("{name}_links")] = json!([{"rel": "next", "href": href}]);
        }
        out
    }

    /// The href of the next page when this one is full (`count` items, the
    /// last of which is `last`): `path` with the query's other parameters,
    /// this limit and `last` as marker.
    pub fn next(&self, path: &str, q: &HashMap<String, String>, count: usize, last: Option<&str>) -> Option<String> {
        let marker = last.filter(|_| count >= self.limit)?;
        let mut query = form_urlencoded::Serializer::new(String::new());
        let mut keys: Vec<&String> = q.keys().filter(|k| *k != "limit" && *k != "marker").collect();
        keys.sort();
        for k in keys {
            query.append_pair(k, &q[k]);
        }
        query.append_pair("limit", &self.limit.to_string());
        query.append_pair("marker", marker);
        Some(format!("{path}?{}", query.finish()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn limits_are_bounded_and_full_pages_link_the_next() {
        assert_eq!(Page::of(&q(&[]), 1000).unwrap().limit, 1000);
        assert_eq!(Page::of(&q(&[("limit", "5000")]), 1000).unwrap().limit, 1000);
        for bad in ["0", "-1", "x", ""] {
            assert_eq!(Page::of(&q(&[("limit", bad)]), 1000).unwrap_err().code, ErrorCode::BadLimit, "{bad}");
        }
        let query = q(&[("limit", "2"), ("status", "ACTIVE")]);
        let page = Page::of(&query, 1000).unwrap();
        let full = page.answer("leases", "/v1/leases", &query, vec![json!({"id": "a"}), json!({"id": "b"})], "id");
        assert_eq!(full["leases_links"][0]["href"], "/v1/leases?status=ACTIVE&limit=2&marker=b");
        let short = page.answer("leases", "/v1/leases", &query, vec![json!({"id": "a"})], "id");
        assert!(short.get("leases_links").is_none());
    }
}
