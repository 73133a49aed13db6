//! A whole list, streamed: what Blazar's list routes answer when asked
//! neither `limit` nor `marker`, as Blazar does (its client follows no
//! links). The list is read a page (the server's `max_page`) at a time, in
//! list order from the last item's key, and each page is written out as
//! it comes, so berthd holds one page however long the list, and no
//! database connection between pages.
//!
//! The handler reads the first page itself, after its policy check, so a
//! refusal or a failure there is an error answer. Once the first page is
//! out the status is 200: a failure after it breaks the body off, which
//! the client sees as a broken answer, never as a complete short list.
//!
//! The request timeout ends with the handler, before the body is written,
//! so the list carries its own deadline, the request timeout from when the
//! request was taken: a page not read by then breaks the body off.

use std::future::Future;

use axum::body::{Body, Bytes};
use axum::http::header::CONTENT_TYPE;
use axum::http::HeaderValue;
use axum::response::Response;
use berth_app::reads::{stale_ok, stale_ok_scope, Lsn};
use futures::StreamExt;
use serde_json::Value;
use tokio::time::{timeout_at, Instant};

/// A whole list asked for: the page size it is read in and its deadline.
#[derive(Debug, Clone, Copy)]
pub struct Whole {
    page: usize,
    deadline: Instant,
}

/// How a list's items are shown and where the list goes on from.
pub struct Items<T, K> {
    /// The item as the answer shows it.
    pub render: Box<dyn Fn(&T) -> Value + Send>,
    /// The item's place in the list: the next page starts after it.
    pub key: fn(&T) -> K,
}

type Chunk = Result<Bytes, std::io::Error>;

impl Whole {
    pub(crate) fn new(page: usize, deadline: Instant) -> Whole {
        Whole { page: page.max(1), deadline }
    }

    /// How many items each read asks for.
    pub fn sql_limit(&self) -> i64 {
        i64::try_from(self.page).unwrap_or(i64::MAX)
    }

    /// `{"<name>": [every item]}`: `first` (the first page, read by the
    /// handler), then the pages `next(key of the last item)` reads, until
    /// one comes back short.
    pub fn answer<T, K, N, F>(self, name: &str, first: Vec<T>, items: Items<T, K>, next: N) -> Response
    where
        T: Send + 'static,
        K: Send + 'static,
        N: FnMut(K) -> F + Send + 'static,
        F: Future<Output = Result<Vec<T>, berth_core::Error>> + Send + 'static,
    {
        let mut head = Vec::new();
        serde_json::to_writer(&mut head, &serde_json::json!({ name: [] })).expect("a JSON value writes to memory");
        head.truncate(head.len().saturating_sub(2)); // `]}`: the items go on before it
        let after = self.write(&mut head, &first, &items, true);
        let Some(after) = after else {
            // All of it in one page: an answer of known length.
            return json_response(Body::from(head));
        };
        let rest = Rest { whole: self, items, next, scope: stale_ok_scope() };
        let tail = futures::stream::unfold(Some((after, rest)), |state| async move {
            let (after, mut rest) = state?;
            match rest.read(after).await {
                Ok((chunk, after)) => Some((Ok(chunk), after.map(|k| (k, rest)))),
                Err(e) => Some((Err(e), None)),
            }
        });
        let body = futures::stream::once(async move { Chunk::Ok(head.into()) }).chain(tail);
        json_response(Body::from_stream(body))
    }

    /// Writes `page`'s items to `buf`, and the list's end if the page is
    /// short; the key to go on from if it is full.
    fn write<T, K>(&self, buf: &mut Vec<u8>, page: &[T], items: &Items<T, K>, first: bool) -> Option<K> {
        for (i, item) in page.iter().enumerate() {
            if !(first && i == 0) {
                buf.push(b',');
            }
            serde_json::to_writer(&mut *buf, &(items.render)(item)).expect("a JSON value writes to memory");
        }
        match page.last() {
            Some(last) if page.len() >= self.page => Some((items.key)(last)),
            _ => {
                buf.extend_from_slice(b"]}");
                None
            }
        }
    }
}

fn json_response(body: Body) -> Response {
    let mut resp = Response::new(body);
    resp.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    resp
}

/// What the body reads the pages after the first with.
struct Rest<T, K, N> {
    whole: Whole,
    items: Items<T, K>,
    next: N,
    /// The handler's standby scope, kept for the later pages' reads.
    scope: Option<Option<Lsn>>,
}

impl<T, K, N, F> Rest<T, K, N>
where
    N: FnMut(K) -> F,
    F: Future<Output = Result<Vec<T>, berth_core::Error>>,
{
    /// The page after `after` as the answer's next chunk, and the key to
    /// go on from; an error breaks the answer off.
    async fn read(&mut self, after: K) -> Result<(Bytes, Option<K>), std::io::Error> {
        let read = (self.next)(after);
        let read = async {
            match self.scope {
                Some(token) => stale_ok(token, read).await,
                None => read.await,
            }
        };
        let page = match timeout_at(self.whole.deadline, read).await {
            Ok(Ok(page)) => page,
            Ok(Err(e)) => {
                tracing::error!(error = %e, "reading a list mid-answer; the answer is broken off");
                return Err(std::io::Error::other("the list could not be read to its end"));
            }
            Err(_) => {
                tracing::warn!("a list ran past the request timeout; the answer is broken off");
                return Err(std::io::Error::other("the list ran past the request timeout"));
            }
        };
        let mut buf = Vec::new();
        let after = self.whole.write(&mut buf, &page, &self.items, false);
        Ok((buf.into(), after))
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use http_body_util::BodyExt;

    use super::*;

    fn numbers() -> Items<u32, u32> {
        Items { render: Box::new(|n| serde_json::json!({ "n": n })), key: |n| *n }
    }

    /// The body's chunks until it ends or breaks: the text and whether it broke.
    async fn read(resp: Response) -> (String, bool) {
        let mut body = resp.into_body();
        let mut text = Vec::new();
        while let Some(frame) = body.frame().await {
            match frame {
                Ok(f) => text.extend_from_slice(&f.into_data().unwrap_or_default()),
                Err(_) => return (String::from_utf8(text).unwrap(), true),
            }
        }
        (String::from_utf8(text).unwrap(), false)
    }

    fn in_a_minute() -> Instant {
        Instant::now().checked_add(Duration::from_secs(60)).unwrap()
    }

    #[tokio::test]
    async fn every_page_is_written_once_in_order_as_one_document() {
        for total in [0u32, 1, 2, 3, 6, 7] {
            let whole = Whole::new(3, in_a_minute());
            let first: Vec<u32> = (1..=total.min(3)).collect();
            let resp = whole.answer("things", first, numbers(), move |after: u32| async move {
                Ok((after + 1..=total).take(3).collect())
            });
            let (text, broke) = read(resp).await;
            assert!(!broke, "{total}: {text}");
            let all: Vec<Value> = (1..=total).map(|n| serde_json::json!({ "n": n })).collect();
            assert_eq!(text, serde_json::to_string(&serde_json::json!({ "things": all })).unwrap(), "{total}");
        }
    }

    #[tokio::test]
    async fn a_failure_or_the_deadline_mid_list_breaks_the_body() {
        let whole = Whole::new(2, in_a_minute());
        let failing = |_: u32| async { Err::<Vec<u32>, _>(berth_core::Error::internal("gone")) };
        let (text, broke) = read(whole.answer("things", vec![1, 2], numbers(), failing)).await;
        assert!(broke, "{text}");
        assert!(serde_json::from_str::<Value>(&text).is_err(), "a broken list must not parse: {text}");
        let late = Whole::new(2, Instant::now().checked_add(Duration::from_millis(50)).unwrap());
        let slow = |after: u32| async move {
            tokio::time::sleep(Duration::from_secs(5)).await;
            Ok(vec![after + 1])
        };
        let (text, broke) = read(late.answer("things", vec![1, 2], numbers(), slow)).await;
        assert!(broke, "{text}");
    }
}
