//! Real-request probe: a tiny deterministic request that must come back with a token.
//!
//! A health endpoint can say 200 while the model cannot generate (a broken kernel, a worker still
//! compiling); one token from a real request cannot lie. Contract of [`probe`]:
//! - [`RequestKind::Openai`]: `GET {base}/v1/models` for the first `data[].id`, then
//!   `POST {base}/v1/completions` with `{"model": id, "prompt": "ping", "max_tokens": 1,
//!   "temperature": 0}`; `Up` when the answer has `choices[0].text` or
//!   `usage.completion_tokens >= 1`.
//! - [`RequestKind::Tgi`]: `POST {base}/generate` with
//!   `{"inputs": "ping", "parameters": {"max_new_tokens": 1}}`; `Up` when it has `generated_text`.
//! - 5xx, 429, refused, closed, or no answer within the timeout → `NotYet`; a 3xx or 4xx answer →
//!   `Rejected`; an answer that is not JSON or lacks what the protocol promises, a URL that is not
//!   http → `Fault`; each naming what was wrong (with the server's own error message when it sent
//!   one).
//!
//! `timeout` bounds the whole probe (both requests for OpenAI). Requests go through the HTTP
//! probe's agent (`http::agent()`): no proxy from the environment, no redirects.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::ProbeOutcome;
use super::http::{Target, agent, error_outcome, non_success};
use crate::duration::format_duration;
use crate::profile::RequestKind;

/// Largest answer read; a 1-token completion is a few hundred bytes, a model list a few KiB.
const BODY_LIMIT: u64 = 1 << 20;

/// Sends a tiny deterministic request to the server at `base_url` (`http://host:port`) and is `Up`
/// only when it returns at least one token.
pub fn probe(base_url: &str, kind: RequestKind, timeout: Duration) -> ProbeOutcome {
    probe_with_key(base_url, kind, timeout, None)
}

/// [`probe`] for a server that wants an API key (`Authorization: Bearer KEY`). The key is never
/// shown in a detail.
pub fn probe_with_key(
    base_url: &str,
    kind: RequestKind,
    timeout: Duration,
    api_key: Option<&str>,
) -> ProbeOutcome {
    let base = base_url.trim_end_matches('/');
    let start = Instant::now();
    let target = match Target::parse(base) {
        Ok(t) => t,
        Err(detail) => return ProbeOutcome::Fault { detail },
    };
    if let Err(detail) = super::resolve(&target.host, target.port, timeout) {
        return ProbeOutcome::Fault { detail };
    }
    let client = Client {
        agent: agent(timeout),
        deadline: start + timeout,
        timeout,
        api_key: api_key.map(str::to_string),
    };
    let result = match kind {
        RequestKind::Openai => openai(&client, base),
        RequestKind::Tgi => tgi(&client, base),
    };
    result.unwrap_or_else(|outcome| outcome)
}

fn openai(client: &Client, base: &str) -> Result<ProbeOutcome, ProbeOutcome> {
    let models_url = format!("{base}/v1/models");
    let (models, _) = client.call(&models_url, None, "is this an OpenAI-compatible server?")?;
    let what = |t: &Target| format!("GET {}", t.shown);
    let data = models
        .json
        .get("data")
        .and_then(Value::as_array)
        .ok_or_else(|| {
            fault(format!(
                "{} returned no data[] list: is this an OpenAI-compatible server?",
                what(&models.target)
            ))
        })?;
    let first = data
        .first()
        .ok_or_else(|| fault(format!("{} lists no model", what(&models.target))))?;
    let model = first.get("id").and_then(Value::as_str).ok_or_else(|| {
        fault(format!(
            "{} returned a model without an id",
            what(&models.target)
        ))
    })?;
    let body = json!({"model": model, "prompt": "ping", "max_tokens": 1, "temperature": 0});
    let (done, latency) = client.call(
        &format!("{base}/v1/completions"),
        Some(body),
        "does this server serve /v1/completions?",
    )?;
    let text = done
        .json
        .pointer("/choices/0/text")
        .is_some_and(Value::is_string);
    let tokens = done
        .json
        .pointer("/usage/completion_tokens")
        .and_then(Value::as_u64)
        .unwrap_or(0);
    if text || tokens >= 1 {
        Ok(ProbeOutcome::Up {
            detail: format!(
                "model '{model}' returned a token in {} (POST {})",
                format_duration(latency),
                done.target.shown
            ),
            latency,
            // Who answered is checked by `probe::owner::guarded`.
            ours: false,
        })
    } else {
        Err(fault(format!(
            "POST {} answered without choices[0].text or completion tokens",
            done.target.shown
        )))
    }
}

fn tgi(client: &Client, base: &str) -> Result<ProbeOutcome, ProbeOutcome> {
    let body = json!({"inputs": "ping", "parameters": {"max_new_tokens": 1}});
    let (done, latency) = client.call(
        &format!("{base}/generate"),
        Some(body),
        "is this a TGI server?",
    )?;
    if done
        .json
        .get("generated_text")
        .is_some_and(Value::is_string)
    {
        Ok(ProbeOutcome::Up {
            detail: format!(
                "TGI returned a token in {} (POST {})",
                format_duration(latency),
                done.target.shown
            ),
            latency,
            ours: false,
        })
    } else {
        Err(fault(format!(
            "POST {} answered without generated_text",
            done.target.shown
        )))
    }
}

fn fault(detail: String) -> ProbeOutcome {
    ProbeOutcome::Fault { detail }
}

struct Client {
    agent: ureq::Agent,
    deadline: Instant,
    timeout: Duration,
    api_key: Option<String>,
}

/// A 2xx answer, parsed.
struct Answer {
    target: Target,
    json: Value,
}

impl Client {
    /// GETs `url` (or POSTs `body` to it as JSON) within what is left of the probe's timeout.
    /// Anything but a 2xx JSON answer is the probe's outcome, as `Err`; `hint_404` is said on a
    /// 404.
    fn call(
        &self,
        url: &str,
        body: Option<Value>,
        hint_404: &str,
    ) -> Result<(Answer, Duration), ProbeOutcome> {
        let target = Target::parse(url).map_err(fault)?;
        let method = if body.is_some() { "POST" } else { "GET" };
        let what = format!("{method} {}", target.shown);
        let left = self.deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(ProbeOutcome::NotYet {
                detail: format!(
                    "no answer from {} within {}",
                    target.shown,
                    format_duration(self.timeout)
                ),
            });
        }
        let t0 = Instant::now();
        let auth = self.api_key.as_ref().map(|k| format!("Bearer {k}"));
        let sent = match body {
            None => {
                let mut req = self.agent.get(url);
                if let Some(a) = &auth {
                    req = req.header("authorization", a);
                }
                req.config().timeout_global(Some(left)).build().call()
            }
            Some(b) => {
                let mut req = self
                    .agent
                    .post(url)
                    .header("content-type", "application/json");
                if let Some(a) = &auth {
                    req = req.header("authorization", a);
                }
                req.config()
                    .timeout_global(Some(left))
                    .build()
                    .send(b.to_string())
            }
        };
        let mut response = sent.map_err(|e| error_outcome(&e, &target, self.timeout))?;
        let code = response.status().as_u16();
        let text = response
            .body_mut()
            .with_config()
            .limit(BODY_LIMIT)
            .read_to_string();
        let latency = t0.elapsed();
        let text = text.map_err(|e| error_outcome(&e, &target, self.timeout))?;
        let json: Result<Value, _> = serde_json::from_str(&text);
        if !(200..300).contains(&code) {
            let said = json.as_ref().ok().and_then(server_message);
            return Err(
                non_success(code, None, &what, latency, said.as_deref(), hint_404)
                    .unwrap_or_else(|| fault(format!("unexpected HTTP {code} from {what}"))),
            );
        }
        match json {
            Ok(json) => Ok((Answer { target, json }, latency)),
            Err(e) => Err(fault(format!("{what} did not answer with JSON ({e})"))),
        }
    }
}

/// The server's own error message in an error answer: OpenAI's `{"error": {"message"}}`, vLLM's
/// `{"message"}`, TGI's `{"error": "..."}`, FastAPI's `{"detail": "..."}`; one line, cut short.
fn server_message(v: &Value) -> Option<String> {
    let m = v
        .pointer("/error/message")
        .or_else(|| v.get("message"))
        .or_else(|| v.get("error"))
        .or_else(|| v.get("detail"))?
        .as_str()?;
    let line = m.lines().next().unwrap_or("").trim();
    const MAX: usize = 200;
    Some(match line.char_indices().nth(MAX) {
        Some((cut, _)) => format!("{}...", &line[..cut]),
        None => line.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::super::testserver::{FakeServer, Reply, http};
    use super::*;
    use crate::bounded_wait::{HANG, bounded};

    const T: Duration = Duration::from_secs(5);
    const MODELS: &str = r#"{"object":"list","data":[{"id":"Qwen/Qwen3-8B","object":"model"}]}"#;

    #[test]
    fn openai_asks_the_model_list_then_one_token() {
        let s = FakeServer::start(vec![
            http("200 OK", MODELS),
            http(
                "200 OK",
                r#"{"choices":[{"text":" pong","index":0}],"usage":{"completion_tokens":1}}"#,
            ),
        ]);
        let out = probe(&s.url("/"), RequestKind::Openai, T);
        let ProbeOutcome::Up { detail, .. } = &out else {
            panic!("expected Up, got {out:?}");
        };
        assert!(
            detail.starts_with("model 'Qwen/Qwen3-8B' returned a token in "),
            "{detail}"
        );
        let models = s.next_request();
        assert_eq!(
            (models.method.as_str(), models.path.as_str()),
            ("GET", "/v1/models")
        );
        let completion = s.next_request();
        assert_eq!(
            (completion.method.as_str(), completion.path.as_str()),
            ("POST", "/v1/completions")
        );
        let sent: Value = serde_json::from_str(&completion.body).unwrap();
        assert_eq!(
            sent,
            json!({"model": "Qwen/Qwen3-8B", "prompt": "ping", "max_tokens": 1, "temperature": 0})
        );
        assert!(
            completion
                .headers
                .contains(&("content-type".into(), "application/json".into()))
        );
    }

    #[test]
    fn openai_counts_completion_tokens_when_text_is_missing() {
        let s = FakeServer::start(vec![
            http("200 OK", MODELS),
            http(
                "200 OK",
                r#"{"choices":[{}],"usage":{"completion_tokens":1}}"#,
            ),
        ]);
        assert!(probe(&s.url(""), RequestKind::Openai, T).is_up());
    }

    #[test]
    fn openai_answers_without_what_the_protocol_promises_are_faults() {
        let table = [
            (
                vec![http("200 OK", "<html>hello</html>")],
                "GET http://ADDR/v1/models did not answer with JSON (",
            ),
            (
                vec![http("200 OK", r#"{"models":[]}"#)],
                "GET http://ADDR/v1/models returned no data[] list: is this an OpenAI-compatible server?",
            ),
            (
                vec![http("200 OK", r#"{"data":[]}"#)],
                "GET http://ADDR/v1/models lists no model",
            ),
            (
                vec![http("404 Not Found", "")],
                "HTTP 404 Not Found from GET http://ADDR/v1/models: is this an OpenAI-compatible server?",
            ),
            (
                vec![
                    http("200 OK", MODELS),
                    http(
                        "400 Bad Request",
                        r#"{"object":"error","message":"max_tokens is too large"}"#,
                    ),
                ],
                "HTTP 400 Bad Request from POST http://ADDR/v1/completions (the server says: max_tokens is too large)",
            ),
            (
                vec![
                    http("200 OK", MODELS),
                    http(
                        "401 Unauthorized",
                        r#"{"error":{"message":"Unauthorized"}}"#,
                    ),
                ],
                "HTTP 401 Unauthorized from POST http://ADDR/v1/completions: the server wants credentials",
            ),
            (
                vec![http("200 OK", MODELS), http("200 OK", r#"{"choices":[]}"#)],
                "POST http://ADDR/v1/completions answered without choices[0].text or completion tokens",
            ),
        ];
        for (replies, want) in table {
            let s = FakeServer::start(replies);
            let want = want.replace("ADDR", &s.addr.to_string());
            let out = probe(&s.url(""), RequestKind::Openai, T);
            // An HTTP status that refuses the request is the server's answer (`Rejected`); an
            // answer that breaks the protocol is a fault of the probe's premise (`Fault`).
            if want.starts_with("HTTP ") {
                assert!(matches!(out, ProbeOutcome::Rejected { .. }), "{out:?}");
            } else {
                assert!(matches!(out, ProbeOutcome::Fault { .. }), "{out:?}");
            }
            assert!(out.detail().starts_with(&want), "{out:?}\nwant: {want}");
        }
    }

    #[test]
    fn loading_refused_and_silent_servers_are_not_yet() {
        let s = FakeServer::start(vec![http(
            "503 Service Unavailable",
            r#"{"error":"Model is loading"}"#,
        )]);
        let out = probe(&s.url(""), RequestKind::Openai, T);
        assert!(matches!(out, ProbeOutcome::NotYet { .. }), "{out:?}");
        assert!(
            out.detail().starts_with(&format!(
                "HTTP 503 Service Unavailable from GET http://{}/v1/models (",
                s.addr
            )),
            "{out:?}"
        );

        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let out = probe(&format!("http://127.0.0.1:{port}"), RequestKind::Tgi, T);
        assert_eq!(
            out,
            ProbeOutcome::NotYet {
                detail: format!("connection refused by 127.0.0.1:{port}")
            }
        );

        // The whole probe is bounded: the model list answers, the completion never does.
        let s = FakeServer::start(vec![http("200 OK", MODELS), Reply::Hang]);
        let url = s.url("");
        let out = bounded("a request probe of a hanging server", HANG, move || {
            probe(&url, RequestKind::Openai, Duration::from_millis(400))
        });
        assert_eq!(
            out,
            ProbeOutcome::NotYet {
                detail: format!(
                    "no answer from http://{}/v1/completions within 400ms",
                    s.addr
                )
            }
        );
    }

    #[test]
    fn tgi_generates_one_token() {
        let s = FakeServer::start(vec![http("200 OK", r#"{"generated_text":" pong"}"#)]);
        let out = probe(&s.url("/"), RequestKind::Tgi, T);
        assert!(out.is_up(), "{out:?}");
        assert!(
            out.detail().starts_with("TGI returned a token in "),
            "{out:?}"
        );
        let req = s.next_request();
        assert_eq!(
            (req.method.as_str(), req.path.as_str()),
            ("POST", "/generate")
        );
        let sent: Value = serde_json::from_str(&req.body).unwrap();
        assert_eq!(
            sent,
            json!({"inputs": "ping", "parameters": {"max_new_tokens": 1}})
        );

        let s = FakeServer::start(vec![http(
            "422 Unprocessable Entity",
            r#"{"error":"Input validation error","error_type":"validation"}"#,
        )]);
        assert_eq!(
            probe(&s.url(""), RequestKind::Tgi, T),
            ProbeOutcome::Rejected {
                detail: format!(
                    "HTTP 422 Unprocessable Entity from POST http://{}/generate (the server says: \
                     Input validation error)",
                    s.addr
                )
            }
        );
        let s = FakeServer::start(vec![http("200 OK", r#"[{"generated_text":1}]"#)]);
        assert_eq!(
            probe(&s.url(""), RequestKind::Tgi, T),
            ProbeOutcome::Fault {
                detail: format!(
                    "POST http://{}/generate answered without generated_text",
                    s.addr
                )
            }
        );
    }
}
