package raftstore

import (
	"errors"
	"fmt"
	"testing"
)

// TestFSMDismissals: a dismissal is put and deleted through raw log
// entries (deleting twice is fine), rides in a Txn with the experiment's
// delete, survives a snapshot, is validated, and the table is bounded.
func TestFSMDismissals(t *testing.T) {
	h := newHarness(t, false)
	const name = "policies/http/experiments/branch-x"
	h.mustApply(expPut(name))
	txn, err := NewTxn(&DeleteExperiment{Name: name}, &PutDismissal{Dismissal: Dismissal{Name: name, Etag: "e1"}})
	if err != nil {
		t.Fatal(err)
	}
	h.mustApply(txn)
	s := h.fsm.State()
	if _, ok := s.Experiments[name]; ok || s.Dismissed[name].Etag != "e1" {
		t.Fatalf("after the delete: %s", jsonOf(t, s))
	}
	restored := roundTrip(t, h.fsm).State()
	if restored.Dismissed[name].Etag != "e1" {
		t.Fatalf("restored: %s", jsonOf(t, restored))
	}
	h.mustApply(&DeleteDismissal{Name: name})
	h.mustApply(&DeleteDismissal{Name: name})
	if len(h.fsm.State().Dismissed) != 0 {
		t.Fatalf("after DeleteDismissal: %s", jsonOf(t, h.fsm.State()))
	}
	for _, bad := range []Payload{&PutDismissal{Dismissal: Dismissal{Name: "x", Etag: "e"}},
		&PutDismissal{Dismissal: Dismissal{Name: name}}, &DeleteDismissal{Name: "policies/x"}} {
		if _, err := NewCommand(bad); !errors.Is(err, ErrInvalidCommand) {
			t.Errorf("%+v: %v, want ErrInvalidCommand", bad, err)
		}
	}
	st := NewState()
	for i := range MaxDismissals {
		st.Dismissed[fmt.Sprintf("policies/p/experiments/e%d", i)] = Dismissal{}
	}
	err = applyPutDismissal(st, PutDismissal{Dismissal: Dismissal{Name: name, Etag: "e"}})
	if !errors.Is(err, ErrTableFull) {
		t.Errorf("a put beyond MaxDismissals: %v", err)
	}
}
