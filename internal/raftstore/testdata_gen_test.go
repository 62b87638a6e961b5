package raftstore

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// The data directory under testdata/v1-datadir was written by this
// generator with the build of commit d389dee, before the typed tables:
// every record kind of that build went into the log through the commands it
// had, the leader's records as PutExperiment documents under the prefixes
// "sources/git", "branches/", "pulls/" and "commands/". Phase A is covered
// by the snapshot (snapshots/*/state.bin), phase B only by the log tail
// after it; raft.db still holds every entry from index 1 (TrailingLogs is
// far above the count), so a replay of the whole log covers both phases.
//
// Those two commands (types 20 and 21) are LegacyPutExperiment and
// LegacyDeleteExperiment now. The documents are the JSON those builds wrote (preview.Experiment,
// preview.Operation, reconcile.SourceRecord, BranchRecord, PullRecord,
// CommandRecord), copied as literals so that this file does not depend on
// the packages that later changed them. The tests in migrate_test.go read
// the committed directory; rerunning the generator with a newer build
// writes that build's shapes, which is not what those tests are about:
//
//	RAFTSTORE_WRITE_V1_TESTDATA=1 go test -run TestWriteV1Testdata ./internal/raftstore/
func TestWriteV1Testdata(t *testing.T) {
	if os.Getenv("RAFTSTORE_WRITE_V1_TESTDATA") == "" {
		t.Skip("writes testdata; set RAFTSTORE_WRITE_V1_TESTDATA=1 to regenerate")
	}
	dir := t.TempDir()
	s := openTCP(t, "node-1", "127.0.0.1:0", dir, true)
	if _, _, err := s.WaitForLeader(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	for _, p := range v1PhaseA() {
		propose(t, s, p)
	}
	if err := s.Snapshot(); err != nil {
		t.Fatal(err)
	}
	for _, p := range v1PhaseB() {
		propose(t, s, p)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join("testdata", "v1-datadir")
	if err := os.MkdirAll("testdata", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(out); err != nil {
		t.Fatal(err)
	}
	if b, err := exec.Command("cp", "-r", dir, out).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v: %s", err, b)
	}
}

// Documents of the v1 build, as it encoded them.
const (
	v1ExpPR7    = `{"name":"policies/http/experiments/pr-7","etag":"5eb7f0e53a65e8ccbbba84d6f6747af3","policy":{"name":"http","default_action":"deny","group":"","on_error":"","rules":[{"name":"allow-get","priority":10,"action":"allow","match":"request.method == 'GET'"}]},"previewMetadata":{"state":"ACTIVE","logPrefix":"PolicyPreviewLog","startTime":"2026-11-25T12:00:00Z"},"source":{"kind":"pull_request","number":7,"headCommit":"1111111111111111111111111111111111111111","url":"https://github.com/o/r/pull/7"},"previewed":true,"createTime":"2026-11-25T12:00:00Z","updateTime":"2026-11-25T12:00:00Z"}`
	v1ExpBranch = `{"name":"policies/http/experiments/branch-feature","etag":"5eb7f0e53a65e8ccbbba84d6f6747af3","policy":{"name":"http","default_action":"deny","group":"","on_error":"","rules":[{"name":"allow-get","priority":10,"action":"allow","match":"request.method == 'GET'"}]},"source":{"kind":"branch","branch":"feature","headCommit":"2222222222222222222222222222222222222222"},"previewed":true,"createTime":"2026-11-25T12:00:00Z","updateTime":"2026-11-25T12:00:00Z"}`
	v1Op        = `{"name":"operations/2b721436ae8cedace06593c2","done":true,"metadata":{"@type":"type.googleapis.com/reconciler.v1.CreatePolicyExperimentMetadata","target":"policies/http/experiments/pr-7","verb":"create","createTime":"2026-11-25T12:00:00Z","endTime":"2026-11-25T12:00:00Z"},"response":{"@type":"type.googleapis.com/reconciler.v1.PolicyExperiment","name":"policies/http/experiments/pr-7","etag":"5eb7f0e53a65e8ccbbba84d6f6747af3"}}`
	v1Source    = `{"url":"https://github.com/o/r.git","error":"fetching origin: connection refused; retrying at the next poll","reason":"network","since":"2026-11-25T12:01:00Z","revision":"main@sha1:3333333333333333333333333333333333333333"}`
	v1Source2   = `{"url":"https://github.com/o/r.git","error":"fetching origin: authentication required","reason":"auth","since":"2026-11-25T12:01:00Z","revision":"main@sha1:3333333333333333333333333333333333333333"}`
	v1Branch    = `{"branch":"feature","headCommit":"2222222222222222222222222222222222222222","revision":"feature@sha1:2222222222222222222222222222222222222222","changedPolicies":["http"],"validation":{"valid":true,"errors":[]}}`
	v1Branch2   = `{"branch":"broken","headCommit":"4444444444444444444444444444444444444444","revision":"broken@sha1:4444444444444444444444444444444444444444","changedPolicies":["http"],"validation":{"valid":false,"errors":["http/policy.toml:3: default_action must be allow or deny"]}}`
	v1Pull7     = `{"number":7,"title":"Allow GET","url":"https://github.com/o/r/pull/7","author":"alice","headCommit":"1111111111111111111111111111111111111111","mainCommit":"3333333333333333333333333333333333333333","changedPolicies":["http"],"etags":{"http":"5eb7f0e53a65e8ccbbba84d6f6747af3"},"liveEtags":{"http":"0123456789abcdef0123456789abcdef"},"validation":{"valid":true,"errors":[]},"preview":"ACTIVE"}`
	v1Pull8     = `{"number":8,"title":"Deny all","url":"https://github.com/o/r/pull/8","author":"bob","headCommit":"5555555555555555555555555555555555555555","mainCommit":"3333333333333333333333333333333333333333","changedPolicies":[],"etags":{},"liveEtags":{},"validation":{"valid":true,"errors":[]},"preview":"SUSPENDED"}`
	v1Claim1    = `{"commentId":1001,"pr":7,"user":"alice","verb":"status","time":"2026-11-25T12:02:00Z"}`
	v1Claim2    = `{"commentId":1002,"pr":7,"user":"alice","verb":"preview stop","time":"2026-11-25T12:03:00Z"}`
	v1Claim3    = `{"commentId":1003,"pr":8,"user":"bob","verb":"help","time":"2026-11-25T12:04:00Z"}`
)

func v1Put(name, doc string) Payload {
	return &LegacyPutExperiment{Name: name, Data: json.RawMessage(doc)}
}

// v1PhaseA holds every record kind; the snapshot covers it.
func v1PhaseA() []Payload {
	return []Payload{
		&UpsertNode{ID: "node-1", RaftAddr: "127.0.0.1:8300", HTTPAddr: "127.0.0.1:8181", Group: "default",
			Subgroup: "default", Voter: true},
		&UpsertNode{ID: "node-2", RaftAddr: "127.0.0.1:8301", HTTPAddr: "127.0.0.1:8182", Group: "default",
			Subgroup: "default", Voter: true},
		stage(1, 1),
		&ReportReady{Generation: 1, NodeID: "node-1"},
		&ActivateGeneration{Generation: 1},
		&MarkInvalid{Generation: 2, Commit: "bad", Errors: []string{"http/policy.toml:1: syntax error"}},
		stage(3, 3),
		&SetNodeState{ID: "node-2", State: NodeSafe},
		v1Put("policies/http/experiments/pr-7", v1ExpPR7),
		&PutOperation{ID: "2b721436ae8cedace06593c2", Data: json.RawMessage(v1Op)},
		v1Put("sources/git", v1Source),
		v1Put("branches/feature", v1Branch),
		v1Put("pulls/7", v1Pull7),
		v1Put("commands/1001", v1Claim1),
		v1Put("commands/1002", v1Claim2),
		&LegacyDeleteExperiment{Name: "commands/1001"},
	}
}

// v1PhaseB touches every kind again after the snapshot: only the log tail
// holds it.
func v1PhaseB() []Payload {
	return []Payload{
		&ReportReady{Generation: 3, NodeID: "node-1"},
		&ActivateGeneration{Generation: 3},
		&RemoveNode{ID: "node-2"},
		v1Put("policies/http/experiments/branch-feature", v1ExpBranch),
		&LegacyDeleteExperiment{Name: "policies/http/experiments/pr-7"},
		&DeleteOperation{ID: "2b721436ae8cedace06593c2"},
		v1Put("sources/git", v1Source2),
		v1Put("branches/broken", v1Branch2),
		v1Put("pulls/8", v1Pull8),
		&LegacyDeleteExperiment{Name: "pulls/7"},
		v1Put("commands/1003", v1Claim3),
		&LegacyDeleteExperiment{Name: "commands/1002"},
		&LegacyDeleteExperiment{Name: "branches/feature"},
		v1Put("branches/feature", v1Branch),
	}
}
