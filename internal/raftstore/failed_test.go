package raftstore

import (
	"testing"
)

// The ReportFailed of the builds before node failures were left behind
// (version 1) made a STAGED generation INVALID for everyone; version 2
// records the node's errors and leaves the generation to the leader.

func TestReportFailedLeavesTheGenerationStaged(t *testing.T) {
	h := newHarness(t, false)
	h.mustApply(stage(1, 1))
	h.mustApply(&ReportReady{Generation: 1, NodeID: "a", Time: at(2)})
	h.mustApply(&ReportReady{Generation: 1, NodeID: "b", Time: at(2)})
	h.mustApply(&ReportFailed{Generation: 1, NodeID: "b", Errors: []string{"web/policy.toml:3: no such field"}, Time: at(3)})
	s := h.fsm.State()
	g, _ := s.Generation(1)
	if g.State != GenerationStaged || s.Staged != 1 || g.Files == nil {
		t.Fatalf("generation 1 = %s (staged %d): one node's failure must not invalidate it", g.State, s.Staged)
	}
	if _, ready := g.ReadyNodes["b"]; ready || len(g.NodeErrors["b"]) != 1 || len(g.ReadyNodes) != 1 {
		t.Fatalf("ready %v, errors %v: b's Ready must be dropped and its errors kept", g.ReadyNodes, g.NodeErrors)
	}
	h.mustApply(&ActivateGeneration{Generation: 1, Time: at(4)})
	if g, _ := h.fsm.State().ActiveGeneration(); g.Number != 1 || len(g.NodeErrors["b"]) != 1 {
		t.Fatalf("active %+v: the errors of the node left behind stay on record", g)
	}
}

func TestNewCommandWritesEachTypesNewestVersion(t *testing.T) {
	failed := mustCmd(t, &ReportFailed{Generation: 1, NodeID: "a", Errors: []string{"x"}, Time: at(1)})
	ready := mustCmd(t, &ReportReady{Generation: 1, NodeID: "a", Time: at(1)})
	if failed.Version != 2 || ready.Version != CommandVersion {
		t.Fatalf("ReportFailed version %d, ReportReady version %d", failed.Version, ready.Version)
	}
	if !Supported(TypeReportFailed, 1) || Supported(TypeReportFailed, 3) {
		t.Fatal("ReportFailed must accept versions 1 and 2 only")
	}
}

// TestReportFailedV1ReplaysAsBefore: an old build's entry, replayed from
// the log of a data directory, still makes its generation INVALID, while
// this build's entry next to it does not. Both are replayed by Open before
// raft starts, exactly as a restarted node would.
func TestReportFailedV1ReplaysAsBefore(t *testing.T) {
	dir := t.TempDir()
	s := openTCP(t, "solo", "127.0.0.1:0", dir, true)
	if _, _, err := s.WaitForLeader(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	addr := s.Addr()
	propose(t, s, stage(1, 1))
	v1 := rawCmd(t, TypeReportFailed, 1, ReportFailed{Generation: 1, NodeID: "old", Errors: []string{"v1"}, Time: at(2)})
	if _, err := s.Apply(ctxT(t), v1); err != nil {
		t.Fatal(err)
	}
	propose(t, s, stage(2, 3))
	propose(t, s, &ReportFailed{Generation: 2, NodeID: "new", Errors: []string{"v2"}, Time: at(4)})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	check := func(how string, st *State) {
		t.Helper()
		g1, _ := st.Generation(1)
		g2, _ := st.Generation(2)
		if g1.State != GenerationInvalid || g1.NodeErrors["old"][0] != "v1" {
			t.Errorf("%s: generation 1 = %s %v, want INVALID by the version 1 report", how, g1.State, g1.NodeErrors)
		}
		if g2.State != GenerationStaged || st.Staged != 2 || g2.NodeErrors["new"][0] != "v2" {
			t.Errorf("%s: generation 2 = %s %v (staged %d), want STAGED with the version 2 report recorded",
				how, g2.State, g2.NodeErrors, st.Staged)
		}
	}
	check("replayed alone", restoredAlone(t, dir))
	s = openTCP(t, "solo", addr, dir, false)
	check("reopened", s.State())
}

// TestReportFailedV1AppliesAsBefore: the same at the applier, entry by
// entry, next to a version 2 report for the same kind of generation.
func TestReportFailedV1AppliesAsBefore(t *testing.T) {
	for _, v := range []uint8{1, 2} {
		h := newHarness(t, false)
		h.mustApply(stage(1, 1))
		if err := h.applyCmd(rawCmd(t, TypeReportFailed, v,
			ReportFailed{Generation: 1, NodeID: "a", Errors: []string{"e"}, Time: at(2)})); err != nil {
			t.Fatal(err)
		}
		g, _ := h.fsm.State().Generation(1)
		want := map[uint8]GenerationState{1: GenerationInvalid, 2: GenerationStaged}[v]
		if g.State != want || len(g.NodeErrors["a"]) != 1 {
			t.Errorf("version %d: generation 1 = %s %v, want %s", v, g.State, g.NodeErrors, want)
		}
	}
}
