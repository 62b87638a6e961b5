package preview

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/policyrollout/reconciler/internal/engine"
)

// DefaultMaxCompiledBytes bounds, by default, the programs of all the
// experiments one node holds (config preview.max_compiled_bytes): room
// for one experiment at a policy's largest program budget (250,000
// expression nodes, about 96 MiB estimated) beside many small ones.
// Experiments are shadow-evaluated in the node on live traffic, so their
// programs live there; this is what bounds them.
const DefaultMaxCompiledBytes = 128 << 20

// budgetAccount charges the experiments of one CompileAll pass against
// the node's budget (limit 0: none).
type budgetAccount struct {
	limit int64
	used  engine.Size
}

// admit charges what e adds, or refuses it with the budget named (and
// charges nothing).
func (a *budgetAccount) admit(e *Experiment, s engine.Size) error {
	if !a.fits(s) {
		return errorf(ResourceExhausted,
			"its programs (about %s: %d expression nodes, %d regex instructions) and those of the experiments "+
				"previewed before it (about %s) would pass the node's budget "+
				"preview.max_compiled_bytes = %d (%s); stop or delete an experiment, or raise the budget",
			mib(s.Bytes()), s.ExprNodes, s.RegexInsts, mib(a.used.Bytes()), a.limit, mib(a.limit))
	}
	a.used = a.used.Add(s)
	return nil
}

// fits reports whether s would be admitted.
func (a *budgetAccount) fits(s engine.Size) bool {
	return a.limit <= 0 || a.used.Add(s).Bytes() <= a.limit
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// refusal is the reason an experiment is not evaluated on this node, as
// its stats show it: the budget's message, or why it does not compile.
func refusal(err error) string {
	var e *Error
	if errors.As(err, &e) && e.Code == ResourceExhausted {
		return e.Msg
	}
	return "does not compile on this node: " + err.Error()
}

// inStartOrder returns the previewed experiments of exps in the order
// their previews started (then by name): the order the budget admits
// them in, so that a running experiment keeps its place when a later one
// would cross the budget. Experiments not previewed are left out.
func inStartOrder(exps []*Experiment) []*Experiment {
	out := make([]*Experiment, 0, len(exps))
	for _, e := range exps {
		if e != nil && e.Previewed && e.Policy != nil {
			out = append(out, e)
		}
	}
	started := func(e *Experiment) time.Time {
		if e.PreviewMetadata == nil {
			return time.Time{}
		}
		return e.PreviewMetadata.StartTime
	}
	slices.SortStableFunc(out, func(a, b *Experiment) int {
		return cmp.Or(started(a).Compare(started(b)), cmp.Compare(a.Name, b.Name))
	})
	return out
}
