package raftstore

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"

	"github.com/policyrollout/reconciler/internal/version"
)

// The race the conditional write closes: a leader cancels a running
// operation and steps down; the next leader, which read the operation
// still running, completes it. Unconditional (version 1), the completion
// lands over the cancel; conditional (version 2), whichever lands second
// is rejected on every node and the first one stays.
func TestConditionalOperationWriteLosesTheRace(t *testing.T) {
	running := json.RawMessage(`{"done":false}`)
	cancelled := json.RawMessage(`{"done":true,"error":"CANCELLED"}`)
	completed := json.RawMessage(`{"done":true,"response":{}}`)

	h := newHarness(t, false)
	h.mustApply(&PutOperation{ID: "op", Data: running})
	read := OperationMatch(h.fsm.State().Operations["op"], true) // both leaders read it running
	h.mustApply(&PutOperation{ID: "op", Data: cancelled, IfMatch: read})
	err := h.apply(&PutOperation{ID: "op", Data: completed, IfMatch: read})
	if !errors.Is(err, ErrConflict) || !errors.Is(err, ErrRejected) {
		t.Fatalf("completion after cancel: %v, want ErrConflict", err)
	}
	if got := h.fsm.State().Operations["op"].Data; !bytes.Equal(got, cancelled) {
		t.Fatalf("operation = %s, want the cancel to stay", got)
	}

	// What 1.0.0 does: the later write wins, the cancel is lost.
	old := newHarness(t, false)
	old.mustApply(&PutOperation{ID: "op", Data: running})
	old.mustApply(&PutOperation{ID: "op", Data: cancelled})
	old.mustApply(&PutOperation{ID: "op", Data: completed})
	if got := old.fsm.State().Operations["op"].Data; !bytes.Equal(got, completed) {
		t.Fatalf("unconditional: operation = %s, want the completion over the cancel", got)
	}
}

// An unconditional write stays version 1, byte for byte what 1.0.0 writes,
// and a version 1 entry cannot smuggle a condition in.
func TestOperationWriteVersions(t *testing.T) {
	if c := mustCmd(t, &PutOperation{ID: "op", Data: json.RawMessage(`{}`)}); c.Version != 1 || bytes.Contains(c.Payload, []byte("ifMatch")) {
		t.Fatalf("unconditional write = version %d %s, want version 1 without ifMatch", c.Version, c.Payload)
	}
	cond := mustCmd(t, &PutOperation{ID: "op", Data: json.RawMessage(`{}`), IfMatch: OperationMatch(Operation{}, true)})
	if cond.Version != ConditionalOperationVersion {
		t.Fatalf("conditional write = version %d", cond.Version)
	}
	cond.Version = 1
	h := newHarness(t, false)
	if err := h.applyCmd(cond); !errors.Is(err, ErrInvalidCommand) {
		t.Fatalf("version 1 with ifMatch: %v, want ErrInvalidCommand", err)
	}
	if _, err := NewCommand(&PutOperation{ID: "op", IfMatch: "nothex"}); !errors.Is(err, ErrInvalidCommand) {
		t.Fatal("a malformed ifMatch was accepted")
	}
}

// The leader refuses, before the log, a command some voter's release
// cannot apply, also inside a Txn; once every voter runs the release, it
// goes through.
func TestStoreGatesFeaturesOnTheClusterVersion(t *testing.T) {
	s := soloInmem(t, nil)
	if _, err := s.Propose(ctxT(t), &PutOperation{ID: "op", Data: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	match := OperationMatch(s.State().Operations["op"], true)
	cond := &PutOperation{ID: "op", Data: json.RawMessage(`{"done":true}`), IfMatch: match}
	txn, err := NewTxn(cond)
	if err != nil {
		t.Fatal(err)
	}
	cluster := version.Must(version.Oldest)
	s.SetClusterVersion(func() version.V { return cluster })
	if s.Allows(TypePutOperation, ConditionalOperationVersion) {
		t.Fatal("Allows a 1.1.0 command in a 1.0.0 cluster")
	}
	before := s.State().LastIndex
	for _, p := range []Payload{cond, txn} {
		if _, err := s.Propose(ctxT(t), p); !errors.Is(err, ErrNotYet) {
			t.Fatalf("%T in a 1.0.0 cluster: %v, want ErrNotYet", p, err)
		}
	}
	if s.State().LastIndex != before {
		t.Fatal("a refused command reached the log")
	}

	cluster = version.Must("1.1.0")
	if !s.Allows(TypePutOperation, ConditionalOperationVersion) {
		t.Fatal("1.1.0 cluster does not allow conditional writes")
	}
	if _, err := s.Propose(ctxT(t), txn); err != nil {
		t.Fatal(err)
	}
}

// Every snapshot format this build writes is read by the oldest release
// it shares a cluster with; a new format needs a row in snapshotFormats
// and a fallback in snapshotView.
func TestSnapshotFormatsReadByOldest(t *testing.T) {
	for _, s := range []*State{NewState()} {
		var buf bytes.Buffer
		if err := WriteSnapshot(&buf, s); err != nil {
			t.Fatal(err)
		}
		var file snapshotFile
		if err := json.Unmarshal(buf.Bytes(), &file); err != nil {
			t.Fatal(err)
		}
		since, ok := snapshotFormats[file.Format]
		if !ok || version.Must(version.Oldest).Less(version.Must(since)) {
			t.Fatalf("format %d is read from %q on, after %s", file.Format, since, version.Oldest)
		}
	}
}
