package api

import (
	"net/http"
	"strconv"

	"github.com/policyrollout/reconciler/internal/api/apiv1"
	"github.com/policyrollout/reconciler/internal/policy"
	"github.com/policyrollout/reconciler/internal/preview"
)

func newPolicyResource(snap *Snapshot, name string) (apiv1.Policy, bool) {
	cp, ok := snap.Bundle.Policy(name)
	if !ok {
		return apiv1.Policy{}, false
	}
	p := cp.Source()
	rules := p.Rules
	if rules == nil {
		rules = []policy.Rule{}
	}
	return apiv1.Policy{
		Name:          "policies/" + name,
		Etag:          cp.Etag(),
		Generation:    snap.Generation,
		Commit:        snap.Commit,
		Description:   p.Description,
		DefaultAction: p.DefaultAction,
		Group:         p.Group,
		OnError:       p.OnError,
		Rules:         rules,
		Tests:         p.Tests,
		Lists:         apiv1.FromLists(cp.Lists()),
	}, true
}

// listPolicies answers GET /v1/policies with every policy of the active
// generation, in name order.
func (s *policies) listPolicies(w http.ResponseWriter, r *http.Request) {
	snap := s.gens.Current()
	if snap == nil || snap.Bundle == nil {
		s.fail(w, r, errNoGeneration())
		return
	}
	names := snap.Bundle.Names()
	resp := apiv1.PolicyList{Policies: make([]apiv1.Policy, 0, len(names))}
	stats := s.previewStats()
	for _, name := range names {
		if res, ok := newPolicyResource(snap, name); ok {
			s.addPreviewRules(&res, snap, name, stats, false)
			resp.Policies = append(resp.Policies, res)
		}
	}
	s.writeValue(w, r, resp)
}

// getPolicy answers GET /v1/policies/{policy}.
func (s *policies) getPolicy(w http.ResponseWriter, r *http.Request, name string) {
	snap := s.gens.Current()
	if _, err := lookup(snap, name); err != nil {
		s.fail(w, r, err)
		return
	}
	samples, err := withSamples(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	res, _ := newPolicyResource(snap, name)
	s.addPreviewRules(&res, snap, name, s.previewStats(), samples)
	s.writeValue(w, r, res)
}

// previewStats are the cluster's preview stats (merged over the
// heartbeats), nil without a preview runtime.
func (s *policies) previewStats() []preview.Stats {
	if s.preview == nil {
		return nil
	}
	return s.preview.Stats()
}

// allPreviewRules lists the rules in preview of every policy snap serves.
func (s *policies) allPreviewRules(snap *Snapshot) []preview.RuleView {
	if snap.Bundle == nil {
		return nil
	}
	stats := s.previewStats()
	var out []preview.RuleView
	for _, name := range snap.Bundle.Names() {
		if cp, ok := snap.Bundle.Policy(name); ok {
			out = append(out, preview.RuleViews(cp.Source(), stats, s.ruleCap, false)...)
		}
	}
	return out
}

// addPreviewRules shows the policy's rules in preview with their counts.
func (s *policies) addPreviewRules(res *apiv1.Policy, snap *Snapshot, name string, stats []preview.Stats, samples bool) {
	if cp, ok := snap.Bundle.Policy(name); ok {
		res.PreviewRules = preview.RuleViews(cp.Source(), stats, s.ruleCap, samples)
	}
}

// healthz answers GET /healthz: the process is up and serving HTTP.
func (s *nodes) healthz(w http.ResponseWriter) {
	writeJSON(w, http.StatusOK, []byte(`{"status":"SERVING"}`+"\n"))
}

// readyz answers GET /readyz: 200 once a generation is loaded, else 503,
// so that load balancers send decisions only to nodes that can answer.
func (s *nodes) readyz(w http.ResponseWriter, r *http.Request) {
	snap := s.gens.Current()
	if snap == nil {
		s.fail(w, r, errNoGeneration())
		return
	}
	if err := s.outOfRotation(snap); err != nil {
		s.fail(w, r, err)
		return
	}
	b := strconv.AppendUint([]byte(`{"status":"READY","generation":`), snap.Generation, 10)
	writeJSON(w, http.StatusOK, append(b, "}\n"...))
}
