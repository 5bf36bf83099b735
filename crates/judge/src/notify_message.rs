//! One sd_notify datagram as the judge reads it: `READY=1`, `STOPPING=1`, `STATUS=...`,
//! `EXTEND_TIMEOUT_USEC=N` and `ERRNO=N` (`sd_notify(3)`). Other keys (`MAINPID=`, `WATCHDOG=1`,
//! ...) are ignored as systemd ignores what it does not know; invalid UTF-8 is read lossily, so a
//! `READY=1` next to a garbled status still counts. The socket itself belongs to the shell.

use std::time::Duration;

/// One datagram from the command, parsed.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct NotifyMessage {
    /// `READY=1`: the service is ready.
    pub ready: bool,
    /// `STOPPING=1`: the service is stopping.
    pub stopping: bool,
    /// `STATUS=...`: what it is doing, in words.
    pub status: Option<String>,
    /// `EXTEND_TIMEOUT_USEC=...`: move the start deadline to now + this.
    pub extend_timeout: Option<Duration>,
    /// `ERRNO=...`: the error it failed with.
    pub errno: Option<i32>,
}

/// Parses one datagram (`KEY=VALUE` lines).
pub fn parse(datagram: &[u8]) -> NotifyMessage {
    let text = String::from_utf8_lossy(datagram);
    let mut msg = NotifyMessage::default();
    for line in text.split('\n') {
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        match key {
            "READY" => msg.ready = msg.ready || value == "1",
            "STOPPING" => msg.stopping = msg.stopping || value == "1",
            "STATUS" => msg.status = Some(value.to_string()),
            "EXTEND_TIMEOUT_USEC" => {
                if let Ok(us) = value.trim().parse::<u64>() {
                    msg.extend_timeout = Some(Duration::from_micros(us));
                }
            }
            "ERRNO" => {
                if let Ok(n) = value.trim().parse::<i32>() {
                    msg.errno = Some(n);
                }
            }
            _ => {}
        }
    }
    msg
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_keys_systemd_knows() {
        let table: [(&[u8], NotifyMessage); 7] = [
            (
                b"READY=1",
                NotifyMessage {
                    ready: true,
                    ..Default::default()
                },
            ),
            (
                b"READY=1\nSTATUS=Serving on port 8000\nMAINPID=4242\n",
                NotifyMessage {
                    ready: true,
                    status: Some("Serving on port 8000".into()),
                    ..Default::default()
                },
            ),
            (
                b"STATUS=loading weights: 3/8\nEXTEND_TIMEOUT_USEC=90000000",
                NotifyMessage {
                    status: Some("loading weights: 3/8".into()),
                    extend_timeout: Some(Duration::from_secs(90)),
                    ..Default::default()
                },
            ),
            (
                b"STOPPING=1\nERRNO=28\nSTATUS=No space left on device",
                NotifyMessage {
                    stopping: true,
                    errno: Some(28),
                    status: Some("No space left on device".into()),
                    ..Default::default()
                },
            ),
            // A status may itself hold '='; unknown keys, junk and bad numbers are ignored.
            (
                b"STATUS=a=b\nWATCHDOG=1\njunk\nERRNO=x\nEXTEND_TIMEOUT_USEC=-1\nREADY=0",
                NotifyMessage {
                    status: Some("a=b".into()),
                    ..Default::default()
                },
            ),
            // Invalid UTF-8 is replaced, the message still counts.
            (
                b"STATUS=caf\xff\nREADY=1",
                NotifyMessage {
                    ready: true,
                    status: Some("caf\u{fffd}".into()),
                    ..Default::default()
                },
            ),
            (b"", NotifyMessage::default()),
        ];
        for (datagram, want) in table {
            assert_eq!(
                parse(datagram),
                want,
                "{}",
                String::from_utf8_lossy(datagram)
            );
        }
    }
}
