"""The SPDY/3.1 framing of the kubelet API, against frames built here by the spec's layout.

The end-to-end tests (``test_kubelet_streams.py``) show kube-apiserver's spdystream and this
framing agree; these pin what those cannot reach on purpose: a frame split across reads,
several in one read, the header dictionary, a peer speaking another version.
"""

from __future__ import annotations

import hashlib
import struct
import zlib

import pytest

from envtest.api.workloads.kubelet_api.wire import spdy
from envtest.api.workloads.kubelet_api.wire.spdy import (
    DICTIONARY,
    Ping,
    SpdyConnection,
    SpdyProtocolError,
    StreamData,
    StreamOpened,
    StreamReset,
)


class Peer:
    """The client's side, written from the spec: its own compression context."""

    def __init__(self) -> None:
        self.deflate = zlib.compressobj(9, zlib.DEFLATED, 15, 8, zlib.Z_DEFAULT_STRATEGY,
                                        DICTIONARY)
        self.inflate = zlib.decompressobj(zdict=DICTIONARY)

    def headers(self, pairs: dict[str, str]) -> bytes:
        raw = struct.pack(">I", len(pairs)) + b"".join(
            struct.pack(">I", len(k)) + k.encode() + struct.pack(">I", len(v)) + v.encode()
            for k, v in pairs.items())
        return self.deflate.compress(raw) + self.deflate.flush(zlib.Z_SYNC_FLUSH)

    def syn_stream(self, stream_id: int, pairs: dict[str, str], fin: bool = False) -> bytes:
        body = struct.pack(">IIBB", stream_id, 0, 0, 0) + self.headers(pairs)
        return struct.pack(">HHI", 0x8003, 1, (int(fin) << 24) | len(body)) + body

    @staticmethod
    def data(stream_id: int, payload: bytes, fin: bool = False) -> bytes:
        return struct.pack(">II", stream_id, (int(fin) << 24) | len(payload)) + payload


def test_the_dictionary_is_the_spec_s() -> None:
    assert len(DICTIONARY) == 1423
    assert hashlib.sha256(DICTIONARY).hexdigest() == (
        "51d27341373f923f3cd88e1eb7162aeaa3723d7585ff2399201dc06498407f02")


def test_streams_and_data_are_read_whole_across_and_within_reads() -> None:
    peer, server = Peer(), SpdyConnection()
    wire = (peer.syn_stream(1, {"streamtype": "error"})
            + peer.syn_stream(3, {"streamtype": "stdin", "X-Extra": "a\x00b"})
            + peer.data(3, b"hello ") + peer.data(3, b"world", fin=True))
    events = []
    for at in range(0, len(wire), 7):  # 7-byte reads: every frame is split somewhere
        events += server.receive(wire[at:at + 7])
    assert events == [StreamOpened(1, {"streamtype": "error"}),
                      StreamOpened(3, {"streamtype": "stdin", "x-extra": "a"}),
                      StreamData(3, b"hello "), StreamData(3, b"world", fin=True)]
    # The second header block only inflates with the first's context: one per connection.
    assert server.receive(peer.syn_stream(5, {"streamtype": "stdout"})) == [
        StreamOpened(5, {"streamtype": "stdout"})]


def test_control_frames_the_server_answers() -> None:
    server = SpdyConnection()
    rst = struct.pack(">HHIII", 0x8003, 3, 8, 7, 5)
    ping = struct.pack(">HHII", 0x8003, 6, 4, 42)
    window = struct.pack(">HHIII", 0x8003, 9, 8, 7, 1000)  # flow control: ignored
    assert server.receive(rst + ping + window) == [StreamReset(7, 5), Ping(42)]
    assert server.ping_frame(42) == ping


def test_what_the_server_writes_is_what_a_peer_reads() -> None:
    peer, server = Peer(), SpdyConnection()
    frames = server.syn_reply_frame(3, {"X-Stream-Protocol-Version": "v4.channel.k8s.io"})
    head, body = frames[:8], frames[8:]
    assert struct.unpack(">HHI", head) == (0x8003, 2, len(body))
    assert struct.unpack(">I", body[:4]) == (3,)
    raw = peer.inflate.decompress(body[4:])
    assert raw == (struct.pack(">I", 1) + struct.pack(">I", 25) + b"x-stream-protocol-version"
                   + struct.pack(">I", 17) + b"v4.channel.k8s.io")
    big = bytes(range(256)) * 300  # 76,800 bytes: three frames, the FIN on the last
    frames = server.data_frames(3, big, fin=True)
    reader, received, fins = SpdyConnection(), b"", []
    for event in reader.receive(frames):
        assert isinstance(event, StreamData)
        received += event.data
        fins.append(event.fin)
    assert (received, fins) == (big, [False, False, True])
    assert all(len(e.data) <= spdy.CHUNK for e in reader.receive(frames))
    assert SpdyConnection().receive(server.data_frames(9, b"", fin=True)) == [
        StreamData(9, b"", fin=True)]


def test_another_version_or_a_broken_header_block_is_a_protocol_error() -> None:
    with pytest.raises(SpdyProtocolError, match="SPDY version 2"):
        SpdyConnection().receive(struct.pack(">HHII", 0x8002, 6, 4, 1))
    body = struct.pack(">IIBB", 1, 0, 0, 0) + b"not zlib at all"
    with pytest.raises(SpdyProtocolError, match="does not inflate"):
        SpdyConnection().receive(struct.pack(">HHI", 0x8003, 1, len(body)) + body)
