//! The REST half of the sandboxd interface (`proto/filesystem/v1/filesystem.yaml`):
//! `/v1/files/{path}` (GET, HEAD, PUT, DELETE) confined to the workspace by [`super::beneath`],
//! `/v1/health` and `/v1/metadata`. Errors are sandboxd's `{"code", "message"}` objects, the
//! message naming what was refused and why.

use super::beneath::{self, FileError, Found};
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Path, Query, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use std::collections::{BTreeMap, HashMap};
use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::time::Instant;

/// The largest body `PUT` accepts (64 MiB): a workspace file, not a disk image.
pub const MAX_PUT_BYTES: usize = 64 << 20;

/// What the handlers share.
pub struct Rest {
    /// The workspace, opened once: every path is resolved beneath this descriptor.
    pub root: OwnedFd,
    /// When the server started (`uptime_seconds`).
    pub started: Instant,
    /// The variables `/v1/metadata` serves, chosen at start (the environment does not change).
    pub metadata: BTreeMap<String, String>,
}

/// The routes.
pub fn router(state: Arc<Rest>) -> Router {
    Router::new()
        .route(
            "/v1/files/{*path}",
            get(get_file).put(put_file).delete(delete_file),
        )
        .route("/v1/health", get(health))
        .route("/v1/metadata", get(metadata))
        .fallback(|| async {
            error(
                StatusCode::NOT_FOUND,
                "NOT_FOUND",
                "no such endpoint; this server has /v1/files/{path}, /v1/health, /v1/metadata"
                    .into(),
            )
        })
        .layer(DefaultBodyLimit::max(MAX_PUT_BYTES))
        .with_state(state)
}

/// Variable-name parts that keep a variable off `/v1/metadata` whatever its prefix: agents'
/// code can read the endpoint, so a credential placed under the prefix by mistake must not be
/// served (sandboxd does the same).
const SENSITIVE: &[&str] = &[
    "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CRED", "KEY", "AUTH", "BEARER", "PRIVATE", "CERT",
];

/// The server's variables with `prefix`, less those whose names look like credentials.
pub fn metadata_env(prefix: &str) -> BTreeMap<String, String> {
    std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .filter(|(k, _)| k.starts_with(prefix))
        .filter(|(k, _)| {
            let upper = k.to_ascii_uppercase();
            !SENSITIVE.iter().any(|s| upper.contains(s))
        })
        .collect()
}

fn error(status: StatusCode, code: &str, message: String) -> Response {
    (
        status,
        Json(serde_json::json!({ "code": code, "message": message })),
    )
        .into_response()
}

fn file_error(e: FileError) -> Response {
    match e {
        FileError::Bad(m) => error(StatusCode::BAD_REQUEST, "INVALID_ARGUMENT", m),
        FileError::Escape(m) => error(StatusCode::FORBIDDEN, "PERMISSION_DENIED", m),
        FileError::NotFound(m) => error(StatusCode::NOT_FOUND, "NOT_FOUND", m),
        FileError::NotEmpty(m) => error(StatusCode::CONFLICT, "FAILED_PRECONDITION", m),
        FileError::Io(path, e) => {
            let denied = matches!(e.raw_os_error(), Some(libc::EACCES) | Some(libc::EPERM));
            let (status, code) = if denied {
                (StatusCode::FORBIDDEN, "PERMISSION_DENIED")
            } else {
                (StatusCode::INTERNAL_SERVER_ERROR, "INTERNAL")
            };
            error(status, code, format!("`{}`: {e}", path.escape_debug()))
        }
    }
}

/// Refuses query parameters other than `allowed`, naming the first.
fn only(query: &HashMap<String, String>, allowed: &[&str]) -> Result<(), Response> {
    match query.keys().find(|k| !allowed.contains(&k.as_str())) {
        None => Ok(()),
        Some(k) => Err(error(
            StatusCode::BAD_REQUEST,
            "INVALID_ARGUMENT",
            format!(
                "unknown query parameter `{}`; this method takes {}",
                k.escape_debug(),
                if allowed.is_empty() {
                    "none".to_string()
                } else {
                    allowed.join(", ")
                }
            ),
        )),
    }
}

/// Runs a blocking file operation off the async threads.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, FileError> + Send + 'static,
) -> Result<T, Response> {
    match tokio::task::spawn_blocking(f).await {
        Ok(r) => r.map_err(file_error),
        Err(e) => Err(error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "INTERNAL",
            format!("the file operation failed: {e}"),
        )),
    }
}

async fn get_file(
    State(s): State<Arc<Rest>>,
    Path(path): Path<String>,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    if let Err(r) = only(&query, &[]) {
        return r;
    }
    let shown = path.clone();
    match blocking(move || beneath::read(&s.root, &path)).await {
        Err(r) => r,
        Ok(Found::File(bytes)) => {
            ([(header::CONTENT_TYPE, "application/octet-stream")], bytes).into_response()
        }
        Ok(Found::Dir(entries)) => {
            let entries: Vec<_> = entries
                .into_iter()
                .map(|e| {
                    serde_json::json!({
                        "name": e.name,
                        "size": e.size,
                        "type": if e.dir { "directory" } else { "file" },
                        "modified_at": rfc3339(e.mtime),
                        "mode": format!("{:04o}", e.mode),
                    })
                })
                .collect();
            Json(serde_json::json!({ "path": shown, "entries": entries })).into_response()
        }
    }
}

async fn put_file(
    State(s): State<Arc<Rest>>,
    Path(path): Path<String>,
    Query(query): Query<HashMap<String, String>>,
    headers: axum::http::HeaderMap,
    body: Bytes,
) -> Response {
    if let Err(r) = only(&query, &["mode"]) {
        return r;
    }
    let mode = match query.get("mode").map(String::as_str) {
        None => 0o644,
        Some(m) => match parse_mode(m) {
            Some(m) => m,
            None => {
                return error(
                    StatusCode::BAD_REQUEST,
                    "INVALID_ARGUMENT",
                    format!(
                        "mode: four octal digits starting with 0 (0644, 0755), got `{}`",
                        m.escape_debug()
                    ),
                )
            }
        },
    };
    let multipart = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| t.starts_with("multipart/"));
    if multipart {
        return error(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "INVALID_ARGUMENT",
            "multipart bodies are not accepted; send the file's bytes as \
             application/octet-stream"
                .into(),
        );
    }
    match blocking(move || beneath::write(&s.root, &path, &body, mode)).await {
        Ok(()) => StatusCode::NO_CONTENT.into_response(),
        Err(r) => r,
    }
}

async fn delete_file(
    State(s): State<Arc<Rest>>,
    Path(path): Path<String>,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    if let Err(r) = only(&query, &["recursive"]) {
        return r;
    }
    let recursive = match query.get("recursive").map(String::as_str) {
        None | Some("false") => false,
        Some("true") => true,
        Some(other) => {
            return error(
                StatusCode::BAD_REQUEST,
                "INVALID_ARGUMENT",
                format!("recursive: true or false, got `{}`", other.escape_debug()),
            )
        }
    };
    match blocking(move || beneath::remove(&s.root, &path, recursive)).await {
        Ok(()) => StatusCode::NO_CONTENT.into_response(),
        Err(r) => r,
    }
}

async fn health(State(s): State<Arc<Rest>>) -> Response {
    Json(serde_json::json!({
        "status": "ok",
        "uptime_seconds": s.started.elapsed().as_secs(),
    }))
    .into_response()
}

async fn metadata(State(s): State<Arc<Rest>>) -> Response {
    Json(serde_json::json!({ "env": s.metadata })).into_response()
}

/// `0644`-style permission bits (sandboxd's `^0[0-7]{3}$`).
fn parse_mode(text: &str) -> Option<u32> {
    let b = text.as_bytes();
    if b.len() != 4 || b[0] != b'0' || !b.iter().all(|c| (b'0'..=b'7').contains(c)) {
        return None;
    }
    u32::from_str_radix(text, 8).ok()
}

/// Seconds since the epoch as an RFC 3339 UTC time (no date library for one field).
fn rfc3339(secs: i64) -> String {
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // Howard Hinnant's days-to-civil algorithm.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes() {
        assert_eq!(parse_mode("0644"), Some(0o644));
        assert_eq!(parse_mode("0755"), Some(0o755));
        for bad in ["644", "0888", "04755", "", "0x44", "07\u{0}5"] {
            assert_eq!(parse_mode(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn times() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339(1_700_000_000), "2023-11-14T22:13:20Z");
    }

    #[test]
    fn credentials_never_in_metadata() {
        std::env::set_var("SANDBOX_TEST_PLAIN_VALUE", "1");
        std::env::set_var("SANDBOX_TEST_API_TOKEN", "x");
        let env = metadata_env("SANDBOX_TEST_");
        assert_eq!(
            env.get("SANDBOX_TEST_PLAIN_VALUE").map(String::as_str),
            Some("1")
        );
        assert!(!env.contains_key("SANDBOX_TEST_API_TOKEN"));
    }
}
