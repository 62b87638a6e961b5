package raftstore

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

const (
	shaA = "1111111111111111111111111111111111111111"
	shaB = "2222222222222222222222222222222222222222"
)

func branchRec(name string, sec int) BranchRecord {
	return BranchRecord{Branch: name, HeadCommit: shaA, Revision: fmt.Sprintf("%s@sha1:%s", name, shaA),
		ChangedPolicies: []string{"http"}, Validation: Validation{Valid: sec%2 == 0, Errors: []string{}}}
}

func pullRec(n int) PullRecord {
	return PullRecord{Number: n, Title: "t", URL: "https://example.com/pull", Author: "alice", HeadCommit: shaA,
		MainCommit: shaB, ChangedPolicies: []string{"http"}, Etags: map[string]string{"http": "e1"},
		LiveEtags: map[string]string{"http": "e0"}, Validation: Validation{Valid: true}, Preview: "ACTIVE"}
}

func expPut(name string) *PutExperiment {
	return &PutExperiment{Name: name, Data: json.RawMessage(`{"name":"` + name + `"}`)}
}

// randomRecord is a command on one of the leader's tables (property_test).
func randomRecord(r *rand.Rand, sec int) Payload {
	n := 1 + r.IntN(3)
	switch r.IntN(6) {
	case 0:
		return &PutBranch{Record: branchRec(fmt.Sprint("b", n), sec)}
	case 1:
		return &DeleteBranch{Branch: fmt.Sprint("b", n)}
	case 2:
		return &PutPull{Record: pullRec(n)}
	case 3:
		return &DeletePull{Number: n}
	case 4:
		return &PutClaim{Claim: CommandClaim{CommentID: int64(n), PR: n, User: "u", Verb: "status", Time: at(sec)}}
	default:
		return &PutSourceStatus{Source: SourceGit, Status: SourceStatus{Error: fmt.Sprint("down ", sec), Since: at(sec)}}
	}
}

// TestFSMTables drives every table through raw log entries.
func TestFSMTables(t *testing.T) {
	h := newHarness(t, false)
	h.mustApply(expPut("policies/http/experiments/pr-1"))
	h.mustApply(&PutSourceStatus{Source: SourceGit, Status: SourceStatus{URL: "u", Error: "refused", Since: at(1)}})
	h.mustApply(&PutBranch{Record: branchRec("feature", 1)})
	h.mustApply(&PutPull{Record: pullRec(7)})
	h.mustApply(&PutClaim{Claim: CommandClaim{CommentID: 42, PR: 7, User: "alice", Verb: "status", Time: at(2)}})
	s := h.fsm.State()
	if len(s.Experiments) != 1 || s.Sources[SourceGit].Error != "refused" || s.Branches["feature"].HeadCommit != shaA ||
		s.Pulls[7].Author != "alice" || s.Claims[42].Verb != "status" {
		t.Fatalf("tables after puts: %s", jsonOf(t, s))
	}
	h.mustApply(&DeleteExperiment{Name: "policies/http/experiments/pr-1"})
	h.mustApply(&DeleteSourceStatus{Source: SourceGit})
	h.mustApply(&DeleteBranch{Branch: "feature"})
	h.mustApply(&DeletePull{Number: 7})
	h.mustApply(&DeleteClaim{CommentID: 42})
	h.mustApply(&DeleteClaim{CommentID: 42}) // idempotent
	s = h.fsm.State()
	if len(s.Experiments)+len(s.Sources)+len(s.Branches)+len(s.Pulls)+len(s.Claims) != 0 {
		t.Fatalf("tables after deletes: %s", jsonOf(t, s))
	}
}

// TestTableCommandsAreBounded: what a pushed branch or an opened pull
// request controls is refused past its bound, before the log and in Apply.
func TestTableCommandsAreBounded(t *testing.T) {
	long := strings.Repeat("x", MaxTextBytes+1)
	tooMany := make([]string, MaxRecordErrors+1)
	for i := range tooMany {
		tooMany[i] = "e"
	}
	withPull := func(f func(*PullRecord)) Payload {
		r := pullRec(1)
		f(&r)
		return &PutPull{Record: r}
	}
	withBranch := func(f func(*BranchRecord)) Payload {
		r := branchRec("b", 1)
		f(&r)
		return &PutBranch{Record: r}
	}
	cases := map[string]Payload{
		"long title":          withPull(func(r *PullRecord) { r.Title = long }),
		"long author":         withPull(func(r *PullRecord) { r.Author = strings.Repeat("a", MaxKeyBytes+1) }),
		"bad head":            withPull(func(r *PullRecord) { r.HeadCommit = "HEAD; rm -rf" }),
		"bad preview":         withPull(func(r *PullRecord) { r.Preview = "MAYBE" }),
		"zero number":         withPull(func(r *PullRecord) { r.Number = 0 }),
		"NUL in title":        withPull(func(r *PullRecord) { r.Title = "a\x00b" }),
		"shown without time":  withPull(func(r *PullRecord) { r.HeadShown = shaA }),
		"shown time alone":    withPull(func(r *PullRecord) { r.HeadShownAt = at(1) }),
		"bad shown head":      withPull(func(r *PullRecord) { r.HeadShown, r.HeadShownAt = "HEAD~1", at(1) }),
		"too many errors":     withBranch(func(r *BranchRecord) { r.Validation.Errors = tooMany }),
		"long error":          withBranch(func(r *BranchRecord) { r.Validation.Errors = []string{long} }),
		"empty branch":        withBranch(func(r *BranchRecord) { r.Branch = "" }),
		"long branch":         withBranch(func(r *BranchRecord) { r.Branch = strings.Repeat("b", MaxKeyBytes+1) }),
		"source without text": &PutSourceStatus{Source: SourceGit, Status: SourceStatus{Since: at(1)}},
		"claim without time":  &PutClaim{Claim: CommandClaim{CommentID: 1, PR: 1}},
		"experiment name":     expPut("branches/feature"),
		"experiment id":       expPut("policies/http/experiments/Pr_1"),
		"experiment not obj":  &PutExperiment{Name: "policies/a/experiments/b", Data: json.RawMessage(`[1]`)},
	}
	// JSON cannot carry invalid UTF-8 to Apply (the encoder replaces it),
	// so only the proposer's check can see it.
	if _, err := NewCommand(withPull(func(r *PullRecord) { r.Title = "\xff" })); !errors.Is(err, ErrInvalidCommand) {
		t.Errorf("invalid UTF-8: %v", err)
	}
	for name, p := range cases {
		t.Run(name, func(t *testing.T) {
			if _, err := NewCommand(p); !errors.Is(err, ErrInvalidCommand) {
				t.Fatalf("NewCommand: %v", err)
			}
			raw, _ := json.Marshal(p)
			h := newHarness(t, false)
			if err := h.applyCmd(Command{Type: p.CommandType(), Version: 1, Payload: raw}); !errors.Is(err, ErrInvalidCommand) {
				t.Fatalf("Apply: %v", err)
			}
		})
	}
}

// PutPull is written at version 2 (HeadShown, HeadShownAt); a version 1
// entry of an earlier build, with the leader-clock headSince it carried,
// still applies, so a log replays as it did.
func TestPutPullVersions(t *testing.T) {
	rec := pullRec(1)
	rec.HeadShown, rec.HeadShownAt = rec.HeadCommit, at(5)
	cmd := mustCmd(t, &PutPull{Record: rec})
	if cmd.Version != 2 || !Supported(TypePutPull, 1) || Supported(TypePutPull, 3) {
		t.Fatalf("PutPull written at version %d", cmd.Version)
	}
	h := newHarness(t, false)
	if err := h.applyCmd(cmd); err != nil {
		t.Fatal(err)
	}
	if got := h.fsm.State().Pulls[1]; got.HeadShown != shaA || !got.HeadShownAt.Equal(at(5)) {
		t.Fatalf("applied %+v", got)
	}
	old := rawCmd(t, TypePutPull, 1, json.RawMessage(`{"record":{"number":2,"title":"t","url":"","author":"a","headCommit":"`+
		shaB+`","mainCommit":"","changedPolicies":[],"etags":{},"liveEtags":{},"validation":{"valid":true,"errors":null},`+
		`"preview":"ACTIVE","headSince":"2026-11-25T19:00:00Z"}}`))
	if err := h.applyCmd(old); err != nil {
		t.Fatalf("a version 1 entry with headSince: %v", err)
	}
	if got := h.fsm.State().Pulls[2]; got.HeadCommit != shaB || got.HeadShown != "" {
		t.Fatalf("applied %+v", got)
	}
}

func TestFSMTablesAreCapped(t *testing.T) {
	h := newHarness(t, false)
	for i := range MaxClaims {
		h.mustApply(&PutClaim{Claim: CommandClaim{CommentID: int64(i + 1), PR: 1, User: "u", Verb: "v", Time: at(1)}})
	}
	err := h.apply(&PutClaim{Claim: CommandClaim{CommentID: MaxClaims + 1, PR: 1, User: "u", Verb: "v", Time: at(1)}})
	if !errors.Is(err, ErrTableFull) {
		t.Fatalf("claim beyond the cap: %v", err)
	}
	// Replacing a record of a full table is fine.
	h.mustApply(&PutClaim{Claim: CommandClaim{CommentID: 1, PR: 2, User: "u", Verb: "v", Time: at(2)}})
}

// TestFSMTxnIsAtomic: a Txn whose last op is rejected by the state, or
// whose op does not validate, applies nothing; a good one applies all.
func TestFSMTxnIsAtomic(t *testing.T) {
	h := newHarness(t, false)
	for i := range MaxBranches {
		h.mustApply(&PutBranch{Record: branchRec(fmt.Sprint("b", i), 1)})
	}
	before := h.fsm.State()
	full, err := NewTxn(expPut("policies/a/experiments/e"), &PutOperation{ID: "op", Data: json.RawMessage(`{}`)},
		&PutBranch{Record: branchRec("one-too-many", 1)})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.apply(full); !errors.Is(err, ErrTableFull) || !errors.Is(err, ErrRejected) {
		t.Fatalf("txn over a full table: %v", err)
	}
	badOp := Command{Type: TypePutPull, Version: 1, Payload: json.RawMessage(`{"record":{"number":-1}}`)}
	invalidTxn := rawCmd(t, TypeTxn, 1, Txn{Ops: []Command{mustCmd(t, expPut("policies/a/experiments/e")), badOp}})
	if err := h.applyCmd(invalidTxn); !errors.Is(err, ErrInvalidCommand) {
		t.Fatalf("txn with an invalid op: %v", err)
	}
	if after := h.fsm.State(); !sameExceptIndex(before, after) {
		t.Fatal("a rejected txn changed the state")
	}
	if err := invalidTxn.Validate(); !errors.Is(err, ErrInvalidCommand) {
		t.Fatalf("Store.Apply would let the invalid txn into the log: %v", err)
	}
	good, err := NewTxn(expPut("policies/a/experiments/e"), &PutOperation{ID: "op", Data: json.RawMessage(`{}`)},
		&DeleteBranch{Branch: "b0"})
	if err != nil {
		t.Fatal(err)
	}
	h.mustApply(good)
	s := h.fsm.State()
	if _, ok := s.Experiments["policies/a/experiments/e"]; !ok || len(s.Operations) != 1 || len(s.Branches) != MaxBranches-1 {
		t.Fatal("a good txn did not apply whole")
	}
}

func TestTxnRefusesWhatCannotBeBatched(t *testing.T) {
	inner, _ := NewTxn(expPut("policies/a/experiments/e"))
	for name, ps := range map[string][]Payload{
		"lifecycle": {expPut("policies/a/experiments/e"), stage(1, 1)},
		"nested":    {expPut("policies/a/experiments/e"), inner},
		"node":      {expPut("policies/a/experiments/e"), &RemoveNode{ID: "a"}},
	} {
		if _, err := NewTxn(ps...); !errors.Is(err, ErrInvalidCommand) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := NewTxn(); !errors.Is(err, ErrInvalidCommand) {
		t.Errorf("empty txn: %v", err)
	}
	ops := make([]Payload, MaxTxnOps+1)
	for i := range ops {
		ops[i] = &DeletePull{Number: i + 1}
	}
	if _, err := NewTxn(ops...); !errors.Is(err, ErrInvalidCommand) {
		t.Errorf("txn of %d ops: %v", len(ops), err)
	}
	if p, err := Batch(&DeletePull{Number: 1}); err != nil || p.CommandType() != TypeDeletePull {
		t.Errorf("batch of one = %v, %v", p, err)
	}
}

// TestFSMIgnoreUnknownFutureTypes: a command type of a newer build is
// ignored with IgnoreUnknown, and so is a Txn holding one, whole.
func TestFSMIgnoreUnknownFutureTypes(t *testing.T) {
	future := Command{Type: 61, Version: 1, Payload: json.RawMessage(`{"x":1}`)}
	txn := rawCmd(t, TypeTxn, 1, Txn{Ops: []Command{mustCmd(t, expPut("policies/a/experiments/e")), future}})
	for _, ignore := range []bool{true, false} {
		h := newHarness(t, ignore)
		for _, c := range []Command{future, txn} {
			err := h.applyCmd(c)
			if ignore && err != nil || !ignore && !errors.Is(err, ErrUnknownCommand) && !errors.Is(err, ErrInvalidCommand) {
				t.Fatalf("ignore=%v, %s: %v", ignore, c.Type, err)
			}
		}
		if len(h.fsm.State().Experiments) != 0 {
			t.Fatalf("ignore=%v: part of a txn with an unknown op applied", ignore)
		}
	}
}

// TestReservedTypesStayUnused: 13 (Heartbeat) never gets a handler again.
func TestReservedTypesStayUnused(t *testing.T) {
	for _, r := range reservedTypes {
		if _, ok := handlers[r]; ok {
			t.Errorf("reserved type %d has a handler", r)
		}
		if _, ok := typeNames[r]; ok {
			t.Errorf("reserved type %d has a name", r)
		}
	}
	h := newHarness(t, false)
	hb := Command{Type: 13, Version: 1, Payload: json.RawMessage(`{"id":"a","time":"2025-06-01T12:00:00Z"}`)}
	if err := h.applyCmd(hb); !errors.Is(err, ErrUnknownCommand) {
		t.Fatalf("type 13: %v", err)
	}
}

// TestFSMLegacyCommandsLandInTheirTables: old PutExperiment and
// DeleteExperiment entries (types 20, 21) are routed by name.
func TestFSMLegacyCommandsLandInTheirTables(t *testing.T) {
	h := newHarness(t, false)
	put := func(name, doc string) {
		t.Helper()
		h.mustApply(&LegacyPutExperiment{Name: name, Data: json.RawMessage(doc)})
	}
	put("policies/http/experiments/pr-7", `{"name":"policies/http/experiments/pr-7"}`)
	put("sources/git", `{"url":"u","error":"down","since":"2026-01-01T00:00:00Z"}`)
	put("branches/feature", `{"branch":"feature","headCommit":"`+shaA+`","changedPolicies":[],"validation":{"valid":true,"errors":[]}}`)
	put("pulls/7", `{"number":7,"headCommit":"`+shaA+`","preview":"ACTIVE"}`)
	put("commands/9", `{"commentId":9,"pr":7,"user":"u","verb":"status","time":"2026-01-01T00:00:00Z"}`)
	s := h.fsm.State()
	if len(s.Experiments) != 1 || s.Sources["git"].Error != "down" ||
		s.Branches["feature"].HeadCommit != shaA || s.Pulls[7].Preview != "ACTIVE" || s.Claims[9].Verb != "status" {
		t.Fatalf("legacy puts: %s", jsonOf(t, s))
	}
	for name, doc := range map[string]string{
		"pulls/8":        `{"number":7,"headCommit":"` + shaA + `"}`, // record of another number
		"sources/git":    `{"url":"u"}`,                              // no error: was never a status
		"somewhere/else": `{}`,
		"commands/x":     `{"commentId":1}`,
	} {
		if err := h.apply(&LegacyPutExperiment{Name: name, Data: json.RawMessage(doc)}); !errors.Is(err, ErrRejected) {
			t.Errorf("legacy put of %s: %v", name, err)
		}
	}
	for _, name := range []string{"policies/http/experiments/pr-7", "sources/git", "branches/feature", "pulls/7", "commands/9"} {
		h.mustApply(&LegacyDeleteExperiment{Name: name})
	}
	s = h.fsm.State()
	if len(s.Experiments)+len(s.Sources)+len(s.Branches)+len(s.Pulls)+len(s.Claims) != 0 {
		t.Fatalf("legacy deletes: %s", jsonOf(t, s))
	}
}

// FuzzApplyCommand feeds arbitrary log entry data to the applier: it must
// never panic, a rejected command must leave the state as it was, and an
// accepted one must keep every table within its bounds.
func FuzzApplyCommand(f *testing.F) {
	seeds := []Payload{
		expPut("policies/a/experiments/e"), &DeleteExperiment{Name: "policies/a/experiments/e"},
		&PutSourceStatus{Source: SourceGit, Status: SourceStatus{Error: "x", Since: at(1)}},
		&PutBranch{Record: branchRec("b", 1)}, &PutPull{Record: pullRec(3)}, &DeletePull{Number: 3},
		&PutClaim{Claim: CommandClaim{CommentID: 1, PR: 1, Time: at(1)}}, &DeleteClaim{CommentID: 1},
		&LegacyPutExperiment{Name: "pulls/3", Data: json.RawMessage(`{"number":3,"headCommit":"` + shaA + `"}`)},
		&LegacyDeleteExperiment{Name: "commands/1"},
	}
	txn, _ := NewTxn(expPut("policies/a/experiments/e"), &PutBranch{Record: branchRec("c", 1)})
	seeds = append(seeds, txn)
	for _, p := range seeds {
		data, err := mustCmd(f, p).Marshal()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s := NewState()
		_ = (&Applier{State: s}).Apply(mustCmd(t, &PutBranch{Record: branchRec("keep", 1)}))
		before := jsonOf(t, s)
		cmd, err := DecodeCommand(data)
		if err != nil {
			return
		}
		if err := (&Applier{State: s}).Apply(cmd); err != nil {
			if after := jsonOf(t, s); after != before {
				t.Fatalf("rejected %s changed the state:\n%s\n%s", cmd.Type, before, after)
			}
			return
		}
		checkBounds(t, s)
	})
}

func checkBounds(t *testing.T, s *State) {
	t.Helper()
	for name := range s.Experiments {
		if err := experimentName(name); err != nil {
			t.Fatalf("experiments table holds %q", name)
		}
	}
	validAll(t, s.Branches)
	validAll(t, s.Pulls)
	validAll(t, s.Claims)
	validAll(t, s.Sources)
}

func validAll[K comparable, V interface{ Validate() error }](t *testing.T, m map[K]V) {
	t.Helper()
	for k, r := range m {
		if err := r.Validate(); err != nil {
			t.Fatalf("%v: %v", k, err)
		}
	}
}
