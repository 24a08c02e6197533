//! Headless Chromium (Debian's package) driven over the DevTools protocol: a websocket to the
//! page's target, JSON commands and their answers. What the browser tests and the dashboard
//! benchmark use; they skip, saying so, where no Chromium can be started (unless
//! `PROMOTER_REQUIRE_BROWSER` is set, as `.ci/run` does once it installed one).

#![allow(dead_code)]

use anyhow::{Context, anyhow, bail};
use base64::Engine;
use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::time::Duration;
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

/// The Chromium binary: `PROMOTER_CHROMIUM`, else the first of Debian's names on the PATH.
pub fn chromium_binary() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("PROMOTER_CHROMIUM") {
        return Some(PathBuf::from(p));
    }
    let path = std::env::var_os("PATH")?;
    for dir in std::env::split_paths(&path) {
        for name in ["chromium", "chromium-browser", "google-chrome"] {
            let candidate = dir.join(name);
            if candidate.is_file() {
                return Some(candidate);
            }
        }
    }
    None
}

/// Says why a browser test cannot run; fails instead where CI promised a browser.
pub fn skip(why: &str) {
    if std::env::var_os("PROMOTER_REQUIRE_BROWSER").is_some() {
        panic!("PROMOTER_REQUIRE_BROWSER is set but {why}");
    }
    eprintln!("SKIPPED: {why} (`apt-get install -y chromium`; .ci/run installs it)");
}

/// A running headless Chromium; killed when dropped.
pub struct Browser {
    child: tokio::process::Child,
    dir: PathBuf,
    port: u16,
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// One tab.
pub struct Page {
    ws: Socket,
    next: u64,
    /// Events received while waiting for answers (console messages, CSP reports, …).
    pub events: Vec<Value>,
}

impl Browser {
    /// Starts Chromium as the closed network here needs it (nothing fetched from outside, a
    /// fresh profile); `None` when there is no Chromium (after saying so through [`skip`]).
    pub async fn launch() -> anyhow::Result<Option<Browser>> {
        let Some(binary) = chromium_binary() else {
            skip("no Chromium on the PATH");
            return Ok(None);
        };
        let dir = std::env::temp_dir().join(format!(
            "promoter-chromium-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or_default()
        ));
        std::fs::create_dir_all(&dir)?;
        let child = tokio::process::Command::new(&binary)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--disable-extensions",
                "--disable-dev-shm-usage",
                "--hide-scrollbars",
                "--font-render-hinting=none",
                "--remote-debugging-port=0",
                "--remote-debugging-address=127.0.0.1",
            ])
            .arg(format!("--user-data-dir={}", dir.display()))
            .arg("about:blank")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn();
        let child = match child {
            Ok(c) => c,
            Err(e) => {
                skip(&format!("{} does not start: {e}", binary.display()));
                return Ok(None);
            }
        };
        let mut browser = Browser {
            child,
            dir: dir.clone(),
            port: 0,
        };
        // Chromium writes the port it picked into the profile.
        let file = dir.join("DevToolsActivePort");
        for _ in 0..300 {
            if let Ok(text) = std::fs::read_to_string(&file)
                && let Some(port) = text.lines().next().and_then(|l| l.trim().parse().ok())
            {
                browser.port = port;
                return Ok(Some(browser));
            }
            if let Ok(Some(status)) = browser.child.try_wait() {
                skip(&format!("{} exited at start ({status})", binary.display()));
                return Ok(None);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        bail!("Chromium did not open its DevTools port in 30 s")
    }

    /// A new tab, at about:blank, sized `width`×`height`.
    pub async fn page(&self, width: u32, height: u32) -> anyhow::Result<Page> {
        let url = format!("http://127.0.0.1:{}/json/new?about:blank", self.port);
        let target: Value = serde_json::from_str(&http_put(&url).await?)
            .context("DevTools /json/new answered something else than JSON")?;
        let ws_url = target["webSocketDebuggerUrl"]
            .as_str()
            .ok_or_else(|| anyhow!("no webSocketDebuggerUrl in {target}"))?;
        let (ws, _) = tokio_tungstenite::connect_async(ws_url).await?;
        let mut page = Page {
            ws,
            next: 0,
            events: Vec::new(),
        };
        page.call("Page.enable", json!({})).await?;
        page.call("Runtime.enable", json!({})).await?;
        page.call("Log.enable", json!({})).await?;
        page.call(
            "Emulation.setDeviceMetricsOverride",
            json!({"width": width, "height": height, "deviceScaleFactor": 1, "mobile": false}),
        )
        .await?;
        Ok(page)
    }
}

/// DevTools' `/json/new` wants a PUT.
async fn http_put(url: &str) -> anyhow::Result<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| anyhow!("not http: {url}"))?;
    let (host, path) = rest.split_once('/').unwrap_or((rest, ""));
    let mut s = TcpStream::connect(host).await?;
    s.write_all(
        format!(
            "PUT /{path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"
        )
        .as_bytes(),
    )
    .await?;
    // DevTools keeps the connection open: read the head, then Content-Length bytes.
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = tokio::time::timeout(Duration::from_secs(30), s.read(&mut buf))
            .await
            .map_err(|_| anyhow!("DevTools did not answer {url}"))??;
        if n == 0 {
            break;
        }
        out.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&out);
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let length = head
                .lines()
                .filter_map(|l| l.split_once(':'))
                .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
                .and_then(|(_, v)| v.trim().parse::<usize>().ok());
            if length.is_some_and(|l| body.len() >= l) {
                return Ok(body.to_string());
            }
        }
    }
    let text = String::from_utf8_lossy(&out);
    Ok(text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default())
}

impl Page {
    /// One command and its answer (events in between are kept in `events`).
    pub async fn call(&mut self, method: &str, params: Value) -> anyhow::Result<Value> {
        self.next += 1;
        let id = self.next;
        let msg = json!({"id": id, "method": method, "params": params}).to_string();
        self.ws.send(Message::text(msg)).await?;
        let answer = tokio::time::timeout(Duration::from_secs(60), async {
            while let Some(m) = self.ws.next().await {
                let text = match m? {
                    Message::Text(t) => t.to_string(),
                    _ => continue,
                };
                let v: Value = serde_json::from_str(&text)?;
                if v.get("id").and_then(Value::as_u64) == Some(id) {
                    return Ok(v);
                }
                self.events.push(v);
            }
            bail!("the DevTools connection closed")
        })
        .await
        .map_err(|_| anyhow!("{method}: no answer in 60 s"))??;
        if let Some(e) = answer.get("error") {
            bail!("{method}: {e}");
        }
        Ok(answer["result"].clone())
    }

    /// The value of a JavaScript expression (promises awaited).
    pub async fn eval(&mut self, expression: &str) -> anyhow::Result<Value> {
        let r = self
            .call(
                "Runtime.evaluate",
                json!({"expression": expression, "returnByValue": true, "awaitPromise": true}),
            )
            .await?;
        if let Some(e) = r.get("exceptionDetails") {
            bail!("{expression}: {e}");
        }
        Ok(r["result"]["value"].clone())
    }

    pub async fn goto(&mut self, url: &str) -> anyhow::Result<()> {
        self.call("Page.navigate", json!({"url": url})).await?;
        self.wait_for(
            "document.readyState === 'complete'",
            Duration::from_secs(30),
        )
        .await
    }

    /// Waits until `expression` is true, polling; an error naming it after `timeout`.
    pub async fn wait_for(&mut self, expression: &str, timeout: Duration) -> anyhow::Result<()> {
        let start = std::time::Instant::now();
        loop {
            if self.eval(expression).await.ok() == Some(Value::Bool(true)) {
                return Ok(());
            }
            if start.elapsed() > timeout {
                bail!("waited {timeout:?} for {expression}");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// A key pressed and released, as a keyboard would (Tab, Enter, Escape, Shift+Tab, …).
    pub async fn key(&mut self, key: &str, shift: bool) -> anyhow::Result<()> {
        let (code, vk, text) = match key {
            "Tab" => ("Tab", 9, ""),
            "Enter" => ("Enter", 13, "\r"),
            "Escape" => ("Escape", 27, ""),
            " " => ("Space", 32, " "),
            "/" => ("Slash", 191, "/"),
            other => bail!("no key {other:?} here"),
        };
        let modifiers = if shift { 8 } else { 0 };
        let mut down = json!({"type": "keyDown", "key": key, "code": code,
            "windowsVirtualKeyCode": vk, "nativeVirtualKeyCode": vk, "modifiers": modifiers});
        if !text.is_empty() {
            down["text"] = json!(text);
            down["unmodifiedText"] = json!(text);
        }
        self.call("Input.dispatchKeyEvent", down).await?;
        self.call(
            "Input.dispatchKeyEvent",
            json!({"type": "keyUp", "key": key, "code": code,
                "windowsVirtualKeyCode": vk, "nativeVirtualKeyCode": vk, "modifiers": modifiers}),
        )
        .await?;
        Ok(())
    }

    /// Text typed into the focused field.
    pub async fn type_text(&mut self, text: &str) -> anyhow::Result<()> {
        self.call("Input.insertText", json!({"text": text})).await?;
        Ok(())
    }

    /// A click in the middle of the element `selector` finds, as a mouse would.
    pub async fn click(&mut self, selector: &str) -> anyhow::Result<()> {
        let at = self
            .eval(&format!(
                "(() => {{ const e = document.querySelector({sel}); if (!e) return null; e.scrollIntoView({{block: 'center'}}); const r = e.getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2]; }})()",
                sel = serde_json::to_string(selector)?
            ))
            .await?;
        let (x, y) = match at.as_array().map(Vec::as_slice) {
            Some([x, y]) => (x.as_f64().unwrap_or(0.0), y.as_f64().unwrap_or(0.0)),
            _ => bail!("nothing to click at {selector}"),
        };
        for kind in ["mousePressed", "mouseReleased"] {
            self.call(
                "Input.dispatchMouseEvent",
                json!({"type": kind, "x": x, "y": y, "button": "left", "clickCount": 1}),
            )
            .await?;
        }
        Ok(())
    }

    /// A PNG of the page (the whole page when `full`).
    pub async fn screenshot(&mut self, full: bool) -> anyhow::Result<Vec<u8>> {
        let r = self
            .call(
                "Page.captureScreenshot",
                json!({"format": "png", "captureBeyondViewport": full}),
            )
            .await?;
        let data = r["data"]
            .as_str()
            .ok_or_else(|| anyhow!("no screenshot data"))?;
        Ok(base64::engine::general_purpose::STANDARD.decode(data)?)
    }

    /// Console errors and security-policy violations the page reported so far.
    pub fn problems(&self) -> Vec<String> {
        self.events
            .iter()
            .filter_map(|e| match e["method"].as_str() {
                Some("Log.entryAdded") if e["params"]["entry"]["level"] == "error" => Some(
                    e["params"]["entry"]["text"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                ),
                Some("Runtime.exceptionThrown") => {
                    Some(e["params"]["exceptionDetails"].to_string())
                }
                Some("Runtime.consoleAPICalled") if e["params"]["type"] == "error" => {
                    Some(e["params"]["args"].to_string())
                }
                _ => None,
            })
            .collect()
    }
}
