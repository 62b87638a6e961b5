package apiv1

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/policyrollout/reconciler/internal/cluster"
	"github.com/policyrollout/reconciler/internal/lifecycle"
	"github.com/policyrollout/reconciler/internal/preview"
	"github.com/policyrollout/reconciler/internal/raftstore"
)

// mapping is one mapping function applied to a filled record; unset
// lists the view's fields its caller fills instead (what only the
// answering node knows).
type mapping struct {
	view  func() any
	unset []string
}

func mappings() map[string]mapping {
	var (
		gen    raftstore.Generation
		node   raftstore.Node
		hb     cluster.NodeView
		status cluster.NodeStatus
		stats  cluster.Statistics
		source cluster.SourceStatus
		parts  map[string]lifecycle.Status
		exp    preview.Experiment
		view   preview.View
		op     preview.Operation
		ops    preview.OperationListResponse
		change cluster.ChangeStateResponse
		health cluster.HealthCheckResponse
		branch raftstore.BranchRecord
	)
	for _, r := range []any{&gen, &node, &hb, &status, &stats, &source, &parts, &exp, &view, &op, &ops, &change, &health, &branch} {
		fill(r)
	}
	view.ListChunks = nil // never shown: preview.ViewWith drops them
	return map[string]mapping{
		"Generation":       {view: func() any { return FromGeneration(gen, true) }},
		"Node":             {view: func() any { return FromNode(node, hb) }, unset: []string{"Leader", "HeldReasons", "LoadFailures"}},
		"NodeStatus":       {view: func() any { return FromNodeStatus(&status) }},
		"Statistics":       {view: func() any { return FromStatistics(stats) }},
		"SourceStatus":     {view: func() any { return FromSource(source) }},
		"Parts":            {view: func() any { return FromParts(parts) }},
		"ExperimentStatus": {view: func() any { return FromExperimentStatus(&exp) }},
		"BranchStatus":     {view: func() any { return FromBranch("branches/x", branch) }},
		"StatusExperiments": {view: func() any {
			return FromStatusExperiments(map[string]raftstore.BranchRecord{"branches/x": branch}, []*preview.Experiment{&exp})
		}},
		"Experiment":       {view: func() any { return FromExperiment(view) }},
		"Operation":        {view: func() any { return FromOperation(&op) }},
		"OperationList":    {view: func() any { return FromOperationList(ops) }},
		"StateChangeList":  {view: func() any { return FromChangeState(change) }},
		"HealthReportList": {view: func() any { return FromHealthCheck(health) }},
	}
}

// TestRoundTrip: record → view → JSON → view gives the same view, so
// what the server writes is what the CLI reads; and the mapping fills
// every field of the view from the record (a field the record gained and
// the mapping forgot shows here).
func TestRoundTrip(t *testing.T) {
	t.Parallel()
	for name, m := range mappings() {
		t.Run(name, func(t *testing.T) {
			v := m.view()
			data, err := json.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			back := reflect.New(reflect.TypeOf(v))
			if err := json.Unmarshal(data, back.Interface()); err != nil {
				t.Fatal(err)
			}
			if got := back.Elem().Interface(); !reflect.DeepEqual(got, v) {
				t.Errorf("%s did not survive JSON:\nsent %#v\ngot  %#v", name, v, got)
			}
			if zero := zeroFields(reflect.ValueOf(v), ""); !slices.Equal(zero, m.unset) {
				t.Errorf("%s leaves %v unset, want only %v", name, zero, m.unset)
			}
		})
	}
}

// zeroFields names the fields of v left at their zero value, not looking
// into the types the views share with other packages.
func zeroFields(v reflect.Value, prefix string) []string {
	for v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface {
		if v.IsNil() {
			return []string{prefix}
		}
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct || v.Type().PkgPath() != reflect.TypeOf(Status{}).PkgPath() {
		if v.IsZero() {
			return []string{prefix}
		}
		return nil
	}
	var out []string
	for i := 0; i < v.NumField(); i++ {
		f := v.Type().Field(i)
		out = append(out, zeroFields(v.Field(i), strings.TrimPrefix(prefix+"."+f.Name, "."))...)
	}
	return out
}

// Record packages: what raft replicates and nodes send each other. A
// view holding one of their types would change the public JSON whenever
// the record changes.
var recordPackages = []string{"internal/raftstore", "internal/cluster", "internal/lifecycle", "internal/preview"}

// shared are the other packages' types a view may hold, with why: they
// are formats of their own, not records.
var shared = map[string]string{
	"internal/preview.Stats":    "computed on the nodes and merged over heartbeats, never replicated",
	"internal/preview.Verdict":  "computed from the stats and the configured thresholds",
	"internal/preview.RuleView": "a rule in preview with its stats, computed from the served bundle",
	"internal/policy.Policy":    "the policy file format, which the API also reads",
	"internal/policy.Rule":      "the policy file format",
	"internal/policy.Test":      "the policy file format",
	"internal/policy.Action":    "the policy file format",
	"internal/policy.OnError":   "the policy file format",
	"internal/policy.ListKind":  "the policy file format",
}

// TestNoRecordTypes: no view holds a replicated record's type, so
// renaming or reshaping a record cannot change the public JSON.
func TestNoRecordTypes(t *testing.T) {
	t.Parallel()
	seen := map[reflect.Type]bool{}
	for name, newView := range views() {
		for _, bad := range recordTypes(reflect.TypeOf(newView()), seen) {
			t.Errorf("%s holds %s", name, bad)
		}
	}
}

func recordTypes(t reflect.Type, seen map[reflect.Type]bool) []string {
	if seen[t] {
		return nil
	}
	seen[t] = true
	if i := strings.Index(t.PkgPath(), "/internal/"); i >= 0 {
		name := t.PkgPath()[i+1:] + "." + t.Name()
		if _, ok := shared[name]; ok {
			return nil
		}
		for _, p := range recordPackages {
			if strings.HasSuffix(t.PkgPath(), p) {
				return []string{name}
			}
		}
	}
	var out []string
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Array:
		out = recordTypes(t.Elem(), seen)
	case reflect.Map:
		out = append(recordTypes(t.Key(), seen), recordTypes(t.Elem(), seen)...)
	case reflect.Struct:
		for i := 0; i < t.NumField(); i++ {
			out = append(out, recordTypes(t.Field(i).Type, seen)...)
		}
	}
	return out
}
