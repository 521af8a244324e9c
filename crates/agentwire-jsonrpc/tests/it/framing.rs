//! The framer, the decoder and the outbound encoding on their own: chunking independence,
//! oversize lines, bounded memory, cancel safety, the validity rules and id types.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use agentwire_jsonrpc::{
    Decoded, ErrorObject, Frame, FrameError, FrameReader, Id, Incoming, RawJson, decode,
    encode_line,
};
use proptest::prelude::*;
use serde_json::{Value, json};
use tokio::io::{AsyncRead, ReadBuf};

/// Hands out `data` in chunks of the given sizes (cycled), to exercise every split point.
struct Chunked {
    data: Vec<u8>,
    pos: usize,
    sizes: Vec<usize>,
    turn: usize,
}

impl AsyncRead for Chunked {
    fn poll_read(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let size = this.sizes[this.turn % this.sizes.len()].max(1);
        this.turn += 1;
        let n = size.min(this.data.len() - this.pos).min(buf.remaining());
        buf.put_slice(&this.data[this.pos..this.pos + n]);
        this.pos += n;
        Poll::Ready(Ok(()))
    }
}

/// `length` bytes of `a` with no line feed, then `tail`.
struct Endless {
    remaining: u64,
    tail: Vec<u8>,
    tail_pos: usize,
}

impl AsyncRead for Endless {
    fn poll_read(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.remaining > 0 {
            let n = buf
                .remaining()
                .min(usize::try_from(this.remaining).unwrap_or(usize::MAX));
            buf.put_slice(&vec![b'a'; n]);
            this.remaining -= n as u64;
        } else {
            let n = buf.remaining().min(this.tail.len() - this.tail_pos);
            buf.put_slice(&this.tail[this.tail_pos..this.tail_pos + n]);
            this.tail_pos += n;
        }
        Poll::Ready(Ok(()))
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Owned {
    Line(Vec<u8>),
    Oversize(u64),
}

async fn read_all<R: AsyncRead + Unpin>(reader: &mut FrameReader<R>) -> Vec<Owned> {
    let mut frames = Vec::new();
    while let Some(frame) = reader.next_frame().await.expect("read") {
        frames.push(match frame {
            Frame::Line(line) => Owned::Line(line.to_vec()),
            Frame::Oversize { length } => Owned::Oversize(length),
        });
    }
    frames
}

/// The framing rules written the obvious way, over the whole input at once.
fn model(data: &[u8], limit: usize) -> Vec<Owned> {
    let mut pieces: Vec<&[u8]> = data.split(|b| *b == b'\n').collect();
    if pieces.last().is_some_and(|last| last.is_empty()) {
        pieces.pop();
    }
    pieces
        .into_iter()
        .filter_map(|piece| {
            let piece = piece.strip_suffix(b"\r").unwrap_or(piece);
            if piece.len() > limit {
                Some(Owned::Oversize(piece.len() as u64))
            } else if piece.iter().all(|b| matches!(b, b' ' | b'\t' | b'\r')) {
                None
            } else {
                Some(Owned::Line(piece.to_vec()))
            }
        })
        .collect()
}

fn block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(future)
}

fn line_strategy() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        // Short JSON-ish lines, sometimes with CRLF.
        (proptest::collection::vec(b'a'..=b'z', 0..40), any::<bool>()).prop_map(|(body, crlf)| {
            let mut line = b"{\"m\":\"".to_vec();
            line.extend(body);
            line.extend_from_slice(b"\"}");
            if crlf {
                line.push(b'\r');
            }
            line
        }),
        // Blank and whitespace-only lines.
        proptest::collection::vec(prop_oneof![Just(b' '), Just(b'\t'), Just(b'\r')], 0..4),
        // Arbitrary bytes without a line feed, some longer than the limit.
        proptest::collection::vec(
            any::<u8>().prop_filter("no line feed", |b| *b != b'\n'),
            0..300
        ),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn any_chunking_yields_the_frames_of_the_model(
        lines in proptest::collection::vec(line_strategy(), 0..30),
        final_newline in any::<bool>(),
        sizes in proptest::collection::vec(1usize..64, 1..8),
        limit in 1usize..200,
    ) {
        let mut data = lines.join(&b'\n');
        if final_newline {
            data.push(b'\n');
        }
        let expected = model(&data, limit);
        let source = Chunked { data: data.clone(), pos: 0, sizes, turn: 0 };
        let mut reader = FrameReader::new(source, limit);
        let frames = block_on(read_all(&mut reader));
        prop_assert_eq!(&frames, &expected);
        let whole = Chunked { data, pos: 0, sizes: vec![1 << 20], turn: 0 };
        let mut reader = FrameReader::new(whole, limit);
        prop_assert_eq!(block_on(read_all(&mut reader)), expected);
    }

    #[test]
    fn an_oversize_line_is_reported_once_and_the_next_line_is_intact(
        extra in 1usize..5000,
        limit in 1usize..3000,
        crlf in any::<bool>(),
        sizes in proptest::collection::vec(1usize..4096, 1..4),
    ) {
        let mut data = vec![b'x'; limit + extra];
        if crlf {
            data.push(b'\r');
        }
        data.extend_from_slice(b"\n{\"jsonrpc\":\"2.0\",\"method\":\"after\"}\n");
        let source = Chunked { data, pos: 0, sizes, turn: 0 };
        let mut reader = FrameReader::new(source, limit);
        let frames = block_on(read_all(&mut reader));
        let next = b"{\"jsonrpc\":\"2.0\",\"method\":\"after\"}".to_vec();
        let expected = if next.len() > limit {
            vec![Owned::Oversize((limit + extra) as u64), Owned::Oversize(next.len() as u64)]
        } else {
            vec![Owned::Oversize((limit + extra) as u64), Owned::Line(next)]
        };
        prop_assert_eq!(frames, expected);
    }

}

proptest! {
    // Each case feeds megabytes; a few cases cover the range.
    #![proptest_config(ProptestConfig::with_cases(12))]

    #[test]
    fn memory_stays_bounded_while_an_endless_line_is_fed(
        megabytes in 1u64..24,
        limit in 1usize..70_000,
    ) {
        let length = megabytes << 20;
        let source = Endless { remaining: length, tail: b"\n{\"ok\":1}\n".to_vec(), tail_pos: 0 };
        let mut reader = FrameReader::new(source, limit);
        let frames = block_on(read_all(&mut reader));
        prop_assert_eq!(frames, vec![Owned::Oversize(length), Owned::Line(b"{\"ok\":1}".to_vec())]);
        // Never more than the limit, its line ending and one read chunk.
        prop_assert!(reader.buffer_capacity() <= limit + 2 + 8 * 1024, "capacity {}", reader.buffer_capacity());
    }
}

#[tokio::test]
async fn an_oversize_line_at_end_of_input_is_reported_with_its_length() {
    let source = Chunked {
        data: b"{\"a\":1}\nxxxxxxxxxxxxxxxxxxxx\r".to_vec(),
        pos: 0,
        sizes: vec![3],
        turn: 0,
    };
    let mut reader = FrameReader::new(source, 10);
    assert_eq!(
        read_all(&mut reader).await,
        vec![Owned::Line(b"{\"a\":1}".to_vec()), Owned::Oversize(20)]
    );
}

#[tokio::test]
async fn a_frame_of_exactly_the_limit_is_read_with_either_line_ending() {
    let data = b"0123456789\n0123456789\r\n01234567890\n".to_vec();
    let source = Chunked {
        data,
        pos: 0,
        sizes: vec![1],
        turn: 0,
    };
    let mut reader = FrameReader::new(source, 10);
    assert_eq!(
        read_all(&mut reader).await,
        vec![
            Owned::Line(b"0123456789".to_vec()),
            Owned::Line(b"0123456789".to_vec()),
            Owned::Oversize(11),
        ]
    );
}

#[tokio::test]
async fn reads_cancelled_inside_select_lose_no_bytes() {
    use tokio::io::AsyncWriteExt as _;
    let (mut tx, rx) = tokio::io::duplex(16);
    let lines: Vec<String> = (0..200)
        .map(|i| format!("{{\"jsonrpc\":\"2.0\",\"method\":\"m\",\"params\":[{i}]}}"))
        .collect();
    let payload = lines.join("\n") + "\n";
    let writer = tokio::spawn(async move {
        for chunk in payload.as_bytes().chunks(7) {
            tx.write_all(chunk).await.expect("write");
            tokio::task::yield_now().await;
        }
    });
    let mut reader = FrameReader::new(rx, 1024);
    let mut got = Vec::new();
    let mut cancelled = 0u32;
    loop {
        tokio::select! {
            frame = reader.next_frame() => match frame.expect("read") {
                Some(Frame::Line(line)) => got.push(String::from_utf8(line.to_vec()).expect("utf8")),
                Some(Frame::Oversize { length }) => panic!("unexpected oversize {length}"),
                None => break,
            },
            () = tokio::task::yield_now() => cancelled += 1,
        }
    }
    writer.await.expect("writer");
    assert_eq!(got, lines);
    assert!(
        cancelled > 0,
        "the read was never cancelled, so the test proved nothing"
    );
}

#[test]
fn decoder_sorts_messages_and_keeps_id_types() {
    let parse = |text: &str| decode(text.as_bytes(), true).expect("json");
    let raw = |value: Value| Some(RawJson::from(&value));
    assert_eq!(
        parse(r#"{"jsonrpc":"2.0","id":"7","method":"a","params":{}}"#),
        Decoded::Message(Incoming::Request {
            id: Id::String("7".into()),
            method: "a".into(),
            params: raw(json!({})),
        })
    );
    assert_eq!(
        parse(r#"{"jsonrpc":"2.0","id":7,"method":"a"}"#),
        Decoded::Message(Incoming::Request {
            id: Id::from(7),
            method: "a".into(),
            params: None,
        })
    );
    assert_ne!(Id::String("7".into()), Id::from(7));
    assert_eq!(
        parse(r#"{"jsonrpc":"2.0","method":"n","params":[1]}"#),
        Decoded::Message(Incoming::Notification {
            method: "n".into(),
            params: raw(json!([1])),
        })
    );
    assert_eq!(
        parse(r#"{"jsonrpc":"2.0","id":3,"result":null}"#),
        Decoded::Message(Incoming::Response {
            id: Id::from(3),
            outcome: Ok(RawJson::null()),
        })
    );
    assert_eq!(
        parse(r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"x"}}"#),
        Decoded::Message(Incoming::UncorrelatedError(ErrorObject::new(-32700, "x")))
    );
    assert!(matches!(parse("[1,2]"), Decoded::Batch(items) if items.len() == 2));
}

#[test]
fn decoder_reads_the_id_of_invalid_requests_when_it_can() {
    let invalid =
        |text: &str, structured: bool| match decode(text.as_bytes(), structured).expect("json") {
            Decoded::Invalid(invalid) => (invalid.id, invalid.is_response, invalid.reason),
            other => panic!("{text} decoded as {other:?}"),
        };
    assert_eq!(
        invalid(r#"{"id":"x","method":"a"}"#, true),
        (Some(Id::from("x")), false, "\"jsonrpc\" must be \"2.0\"")
    );
    assert_eq!(
        invalid(r#"{"jsonrpc":"2.0","id":5,"method":7}"#, true),
        (Some(Id::from(5)), false, "\"method\" must be a string")
    );
    assert_eq!(
        invalid(r#"{"jsonrpc":"2.0","id":5,"method":"a","params":3}"#, true),
        (
            Some(Id::from(5)),
            false,
            "\"params\" must be an object or an array"
        )
    );
    assert!(matches!(
        decode(
            br#"{"jsonrpc":"2.0","id":5,"method":"a","params":3}"#,
            false
        ),
        Ok(Decoded::Message(Incoming::Request { .. }))
    ));
    assert_eq!(
        invalid(r#"{"jsonrpc":"2.0","id":null,"method":"a"}"#, true),
        (None, false, "a request id must not be null")
    );
    assert_eq!(
        invalid(r#"{"jsonrpc":"2.0","id":[1],"method":"a"}"#, true),
        (None, false, "a request id must be a string or a number")
    );
    assert_eq!(
        invalid(r#"{"jsonrpc":"2.0","id":1,"result":1,"error":{}}"#, true),
        (
            Some(Id::from(1)),
            true,
            "a response has exactly one of \"result\" and \"error\""
        )
    );
    assert_eq!(
        invalid(
            r#"{"jsonrpc":"2.0","id":1,"error":{"code":1.5,"message":"m"}}"#,
            true
        ),
        (
            Some(Id::from(1)),
            true,
            "\"error\" needs an integer \"code\" and a string \"message\""
        )
    );
    assert_eq!(
        invalid(r#"{"jsonrpc":"2.0","id":1}"#, true),
        (
            Some(Id::from(1)),
            false,
            "a message needs \"method\", \"result\" or \"error\""
        )
    );
    assert_eq!(
        invalid("42", true),
        (None, false, "a message must be a JSON object")
    );
}

#[test]
fn encoding_is_one_compact_line_and_limits_are_errors() {
    let message = json!({"jsonrpc":"2.0","method":"n","params":{"text":"é\n"}});
    let line = encode_line(&message, 1 << 20, None).expect("encode");
    assert_eq!(
        line,
        "{\"jsonrpc\":\"2.0\",\"method\":\"n\",\"params\":{\"text\":\"é\\n\"}}\n".as_bytes()
    );
    let length = line.len() - 1;
    assert_eq!(
        encode_line(&message, length - 1, None),
        Err(FrameError::OutboundTooLarge {
            length,
            limit: length - 1
        })
    );
    assert_eq!(
        encode_line(&message, 1 << 20, Some(length - 1)),
        Err(FrameError::LineTooLong {
            length,
            limit: length - 1
        })
    );
    assert!(encode_line(&message, length, Some(length)).is_ok());
    assert_eq!(
        FrameError::LineTooLong {
            length: 1,
            limit: 0
        }
        .code(),
        "jsonrpc.line-too-long"
    );
}

#[test]
fn decoder_keeps_params_as_text_and_writes_them_back_compactly() {
    let line =
        br#"{"jsonrpc":"2\u002e0","id":1,"method":"a","params":{ "text": "x y",	"n": [1, 2.5] }}"#;
    let Ok(Decoded::Message(Incoming::Request { params, .. })) = decode(line, true) else {
        panic!("an escaped version string is still \"2.0\"");
    };
    let params = params.expect("params");
    assert_eq!(params.get(), r#"{ "text": "x y",	"n": [1, 2.5] }"#);
    assert_eq!(
        params.to_value().expect("value"),
        json!({"text": "x y", "n": [1, 2.5]})
    );
    // Text read with whitespace is rewritten compactly when it is sent on.
    let out = encode_line(&json!({"echo": params}), 1 << 20, None).expect("encode");
    assert_eq!(out, b"{\"echo\":{\"text\":\"x y\",\"n\":[1,2.5]}}\n");
    // Compact text goes out as it is.
    let compact = RawJson::from(&json!({"b": 1, "a": "\u{e9}"}));
    assert_eq!(compact.get(), "{\"b\":1,\"a\":\"\u{e9}\"}");
    assert_eq!(
        encode_line(&compact, 1 << 20, None).expect("encode"),
        "{\"b\":1,\"a\":\"\u{e9}\"}\n".as_bytes()
    );
}

#[test]
fn decoder_applies_the_strict_json_rules_and_sorts_batch_elements() {
    let error = decode(br#"{"jsonrpc":"2.0","id":1,"id":2,"method":"a"}"#, true)
        .expect_err("a duplicate key is not JSON here");
    assert_eq!(error.kind.code(), "json.duplicate-key");
    let error = decode(b"{\"jsonrpc\":\"2.0\",\"method\":\"\xff\"}", true).expect_err("bad UTF-8");
    assert_eq!(error.byte_offset, Some(27));
    let Ok(Decoded::Batch(items)) = decode(br#"[{"jsonrpc":"2.0","method":"n"}, 7]"#, true) else {
        panic!("an array is a batch");
    };
    let decoder = agentwire_jsonrpc::Decoder::new(true);
    assert_eq!(
        decoder.sort(items[0].get().as_bytes()),
        Decoded::Message(Incoming::Notification {
            method: "n".into(),
            params: None
        })
    );
    assert!(matches!(
        decoder.sort(items[1].get().as_bytes()),
        Decoded::Invalid(invalid) if invalid.reason == "a message must be a JSON object"
    ));
}
