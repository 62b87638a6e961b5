package harness

import (
	"io"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// RaftAnswerer is a raft transport on loopback that answers every RPC
// with an empty AppendEntries answer, as a fresh node would, until the
// test ends; it returns its address. A leader's probe reaches it (a join
// needs one), and it never holds any of the log.
func RaftAnswerer(t testing.TB) string {
	t.Helper()
	trans, err := raft.NewTCPTransport("127.0.0.1:0", nil, 1, time.Second, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = trans.Close() })
	go func() {
		for rpc := range trans.Consumer() {
			rpc.Respond(&raft.AppendEntriesResponse{}, nil)
		}
	}()
	return string(trans.LocalAddr())
}
