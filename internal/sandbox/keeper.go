package sandbox

import (
	"runtime/debug"
	"runtime/metrics"

	"github.com/policyrollout/reconciler/internal/engine"
	"github.com/policyrollout/reconciler/internal/memlimit"
	"github.com/policyrollout/reconciler/internal/preview"
	"github.com/policyrollout/reconciler/internal/reconcile"
)

// keptValidations is how many validated trees a worker's child holds
// after answering: the live branch's newest and the experiments' trees
// validated between two of its commits. While held, their lists are the
// bases the next content of each list file derives from (adding a line to
// a 1,000,000-entry list then costs the line, not a new table), and their
// unchanged lists are not compiled again.
const keptValidations = 4

// keeper is the child's state between requests.
type keeper struct {
	kept []engine.Validation // newest last
	// keepBytes bounds what the kept trees may hold, measured as the
	// memory the child holds over start (held): half the memory limit, so
	// a node's child never holds more than that between validations
	// (four trees of the largest lists the budgets admit would hold
	// more than the limit itself).
	keepBytes, start uint64
	samples          []metrics.Sample
}

func newKeeper(limit uint64) *keeper {
	s := memlimit.Samples()
	return &keeper{keepBytes: limit / 2, start: memlimit.Held(s), samples: s}
}

// answer is the verdict on req: a policy check or a tree validation.
func (k *keeper) answer(req request) any {
	if req.Policy != nil {
		for _, l := range req.Policy.Lists {
			l.Data = req.ListData[l.Hash]
		}
		return verdictOf(preview.CheckPolicy(req.Policy, req.Engine))
	}
	v := engine.ValidateTree(req.Files, req.Load, req.Engine)
	if len(k.kept) == keptValidations {
		k.kept = k.kept[1:]
	}
	k.kept = append(k.kept, v)
	return reconcile.ValidationOf(v)
}

// settle returns what the last request left behind to the OS once its
// answer is out, so that the next request's growth (the memory budget)
// is measured from what the child holds, not from the free pages of the
// one before.
// When the kept trees hold more than keepBytes, the child forgets them
// (the next change to a list is then compiled whole, as in a fresh child).
func (k *keeper) settle() {
	debug.FreeOSMemory()
	if h := memlimit.Held(k.samples); h > k.start+k.keepBytes {
		k.kept = nil
		debug.FreeOSMemory()
	}
}
