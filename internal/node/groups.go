package node

import (
	"maps"
	"slices"

	"github.com/policyrollout/reconciler/internal/api"
	"github.com/policyrollout/reconciler/internal/engine"
	"github.com/policyrollout/reconciler/internal/policy"
	"github.com/policyrollout/reconciler/internal/preview"
	"github.com/policyrollout/reconciler/internal/reconcile"
)

// compileFor is the loader's compile for a node of group: only the
// generation's policies of that group are merged and compiled, so memory
// and compile time follow the group, and a policy of another group that
// would not compile here (another merge_default, an engine limit) is not
// this node's failure. The leader's validation of the whole tree stays the
// generation's check. A node moves to another group only by a restart
// (while PASSIVE), which compiles everything again for the new group.
func compileFor(group string, lopts policy.LoadOptions, eopts engine.Options) compileFunc {
	lopts.Group = group
	return func(files map[string][]byte) (*engine.Bundle, []string) {
		return reconcile.Compile(files, lopts, eopts)
	}
}

// servedEtags is want (a generation's etags, every group's) without the
// policies b leaves to other groups: the etags this node must hold.
func servedEtags(want map[string]string, b *engine.Bundle) map[string]string {
	elsewhere := b.Elsewhere()
	if len(elsewhere) == 0 {
		return want
	}
	out := make(map[string]string, len(want))
	for name, etag := range want {
		if _, other := elsewhere[name]; !other {
			out[name] = etag
		}
	}
	return out
}

// servedExperiments keeps the experiments a node of group previews: those
// of the policies it serves (live), and those of new policies of its
// group. An experiment of a policy another group serves gets none of this
// node's traffic (its decisions and :mirror answer 404 here), so
// compiling it would cost memory for nothing; the nodes of that group
// preview it, and the leader merges their stats as usual.
func servedExperiments(exps []*preview.Experiment, live map[string]*engine.CompiledPolicy, snap *api.Snapshot,
	group string) []*preview.Experiment {
	var out []*preview.Experiment
	for _, e := range exps {
		if e == nil {
			continue
		}
		name := e.PolicyName()
		_, served := live[name]
		elsewhere := false
		if snap != nil && snap.Bundle != nil {
			_, elsewhere = snap.Bundle.ServedElsewhere(name)
		}
		if served || (!elsewhere && e.Policy != nil && e.Policy.Group == group) {
			out = append(out, e)
		}
	}
	return out
}

// knownGroups are the groups the served generation's policies name (this
// node's and the others'), and the default group; nil before a generation
// is served (nothing to check against yet).
func (m *Main) knownGroups() []string {
	cur := m.gens.Current()
	if cur == nil || cur.Bundle == nil {
		return nil
	}
	groups := []string{policy.DefaultGroup}
	for _, name := range cur.Bundle.Names() {
		if cp, ok := cur.Bundle.Policy(name); ok {
			groups = append(groups, cp.Source().Group)
		}
	}
	groups = slices.AppendSeq(groups, maps.Values(cur.Bundle.Elsewhere()))
	slices.Sort(groups)
	return slices.Compact(groups)
}
