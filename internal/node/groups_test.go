package node

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/policyrollout/reconciler/internal/config"
	"github.com/policyrollout/reconciler/internal/engine"
	"github.com/policyrollout/reconciler/internal/policy"
	"github.com/policyrollout/reconciler/internal/preview"
	"github.com/policyrollout/reconciler/internal/raftstore"
	"github.com/policyrollout/reconciler/internal/reconcile"
)

// edgePolicy is a policy of group edge.
const edgePolicy = `group = "edge"
default_action = "allow"

[[rules]]
name = "no-x"
priority = 1
action = "deny"
match = 'request.method == "X"'
`

// clashPolicy defines rule r in two files: it loads under merge_default
// override and not under fail.
var clashFiles = map[string][]byte{
	"clash/policy.toml": []byte("default_action = \"deny\"\n[[rules]]\nname = \"r\"\npriority = 1\naction = \"allow\"\nmatch = 'request.path == \"/a\"'\n"),
	"clash/more.toml":   []byte("[[rules]]\nname = \"r\"\npriority = 1\naction = \"allow\"\nmatch = 'request.path == \"/b\"'\n"),
}

// groupsStage stages web (group default), edge (group edge) and clash
// (group default), validated by a leader whose merge_default is override.
func groupsStage(t *testing.T, n uint64) *raftstore.StageGeneration {
	t.Helper()
	files := map[string][]byte{"web/policy.toml": []byte(webPolicy(1)), "edge/policy.toml": []byte(edgePolicy)}
	for p, b := range clashFiles {
		files[p] = b
	}
	v := reconcile.Validate(files, policy.LoadOptions{MergeDefault: policy.StrategyOverride}, engine.DefaultOptions())
	if len(v.Problems) > 0 {
		t.Fatal(v.Problems)
	}
	return &raftstore.StageGeneration{Generation: n, Commit: strings.Repeat("a", 40), Files: files, Etags: v.Etags,
		CreateTime: time.Unix(int64(n), 0)}
}

// groupLoader is a test loader of a node of group whose merge_default is
// fail (unlike the leader's).
func groupLoader(t *testing.T, st *raftstore.State, group string) *testLoader {
	tl := newTestLoader(t, st)
	tl.compile = compileFor(group, policy.LoadOptions{}, engine.DefaultOptions())
	return tl
}

// TestLoaderCompilesOnlyItsGroup: a node of group edge compiles and serves
// only the edge policies; a default policy that does not compile on it
// (another merge_default) is not its failure, and its etag check covers
// its own policies only. A default node fails that generation.
func TestLoaderCompilesOnlyItsGroup(t *testing.T) {
	ctx := context.Background()
	edge := groupLoader(t, raftstore.NewState(), "edge")
	edge.store.apply(t, groupsStage(t, 1))
	edge.sync(ctx)
	if len(edge.reports) != 1 {
		t.Fatalf("reports %v", edge.reports)
	}
	if r, ok := edge.reports[0].(*raftstore.ReportReady); !ok {
		t.Fatalf("edge node reported %#v", edge.reports[0])
	} else if r.Generation != 1 {
		t.Fatalf("edge node reported %#v", r)
	}
	edge.store.apply(t, activate(1))
	edge.sync(ctx)
	cur := edge.gens.Current()
	if cur == nil || strings.Join(cur.Bundle.Names(), ",") != "edge" {
		t.Fatalf("edge node serves %+v", cur)
	}
	if g, ok := cur.Bundle.ServedElsewhere("web"); !ok || g != "default" {
		t.Errorf("web served elsewhere by %q %v", g, ok)
	}

	def := groupLoader(t, raftstore.NewState(), "default")
	def.store.apply(t, groupsStage(t, 1))
	def.sync(ctx)
	if f, ok := def.reports[0].(*raftstore.ReportFailed); !ok || !strings.Contains(strings.Join(f.Errors, ";"), "clash") {
		t.Fatalf("the default node must fail clash: %#v", def.reports[0])
	}
}

// TestLoaderGroupWithoutPolicies: a node whose group no policy names
// reports Ready and serves the generation, holding no policy.
func TestLoaderGroupWithoutPolicies(t *testing.T) {
	ctx := context.Background()
	tl := groupLoader(t, raftstore.NewState(), "empty")
	tl.store.apply(t, groupsStage(t, 1))
	tl.sync(ctx)
	if _, ok := tl.reports[0].(*raftstore.ReportReady); !ok {
		t.Fatalf("reported %#v", tl.reports[0])
	}
	tl.store.apply(t, activate(1))
	tl.sync(ctx)
	if cur := tl.gens.Current(); cur == nil || cur.Generation != 1 || len(cur.Bundle.Names()) != 0 {
		t.Fatalf("serves %+v", cur)
	}
}

// TestLoaderRegroupRecompiles: a node restarted in another group (the
// only way its group changes) compiles the active generation again for
// its new group.
func TestLoaderRegroupRecompiles(t *testing.T) {
	ctx := context.Background()
	before := groupLoader(t, raftstore.NewState(), "edge")
	before.store.apply(t, groupsStage(t, 1), activate(1))
	before.sync(ctx)
	after := newTestLoader(t, before.store.State())
	after.compile = compileFor("default", policy.LoadOptions{MergeDefault: policy.StrategyOverride}, engine.DefaultOptions())
	after.sync(ctx)
	if cur := after.gens.Current(); cur == nil || strings.Join(cur.Bundle.Names(), ",") != "clash,web" {
		t.Fatalf("regrouped node serves %+v", cur)
	}
}

// TestNodeServesOnlyItsGroup: a whole node of group edge serves the edge
// policy, is ready and healthy (its etag checks cover its own group), and
// answers a default policy with 404 naming the group that serves it.
func TestNodeServesOnlyItsGroup(t *testing.T) {
	cfg := singleNode(t, webPolicy(1))
	mustWrite(t, filepath.Join(cfg.Git.InitFrom, "edge", "policy.toml"), edgePolicy)
	cfg.Node.Group = "edge"
	m := startNode(t, cfg)
	base := "http://" + m.Addr()
	eventually(t, waitTimeout, "ready", func() error {
		if m.gens.Current() == nil {
			return errors.New("no generation served yet")
		}
		return nil
	})
	if names := m.gens.Current().Bundle.Names(); strings.Join(names, ",") != "edge" {
		t.Fatalf("the edge node compiled %v", names)
	}
	if code := call(t, http.MethodGet, base+"/readyz", "", nil); code != 200 {
		t.Fatalf("readyz %d", code)
	}
	var e struct{ Error struct{ Message string } }
	if code := call(t, http.MethodPost, base+"/v1/policies/web:evaluate", `{"path":"/"}`, &e); code != 404 ||
		!strings.Contains(e.Error.Message, `group "default"`) {
		t.Fatalf("web on the edge node: %d %+v", code, e)
	}
	if code := call(t, http.MethodGet, base+"/v1/policies/web", "", &e); code != 404 || !strings.Contains(e.Error.Message, `group "default"`) {
		t.Fatalf("GET web on the edge node: %d %+v", code, e)
	}
	var h struct{ Nodes []struct{ Healthy string } }
	if code := call(t, http.MethodPost, base+"/v1/nodes:healthCheck", `{"name":"node-t"}`, &h); code != 200 ||
		len(h.Nodes) != 1 || h.Nodes[0].Healthy != "HEALTHY" {
		t.Fatalf("health check %d %+v", code, h)
	}
}

// TestServedExperiments: an edge node previews the experiments of the
// policies it serves and of new edge policies, not those of a policy the
// default group serves, even one that would move it to edge.
func TestServedExperiments(t *testing.T) {
	tl := groupLoader(t, raftstore.NewState(), "edge")
	tl.store.apply(t, groupsStage(t, 1), activate(1))
	tl.sync(context.Background())
	snap := tl.gens.Current()
	cp, _ := snap.Bundle.Policy("edge")
	live := map[string]*engine.CompiledPolicy{"edge": cp}
	exp := func(pol, group string) *preview.Experiment {
		return &preview.Experiment{Name: "policies/" + pol + "/experiments/e1", Policy: &policy.Policy{Name: pol, Group: group}}
	}
	exps := []*preview.Experiment{exp("edge", "edge"), exp("web", "default"), exp("web", "edge"), exp("fresh", "edge"),
		exp("other", "default"), nil}
	var got []string
	for _, e := range servedExperiments(exps, live, snap, "edge") {
		got = append(got, e.Policy.Name+"/"+e.Policy.Group)
	}
	if strings.Join(got, ",") != "edge/edge,fresh/edge" {
		t.Fatalf("previewed %v", got)
	}
}

// TestSubgroupCheckedAtJoin: a node joining in a subgroup its group does
// not declare ([groups.<name>] subgroups) is held PASSIVE with the
// subgroup named in heldReasons; a declared one, and any group's
// "default", join ACTIVE. A declared group needs no policy.
func TestSubgroupCheckedAtJoin(t *testing.T) {
	c := newTestCluster(t)
	declare := func(cfg *config.Config) {
		cfg.Groups = map[string]config.GroupDecl{"edge": {Subgroups: []string{"eu"}}}
	}
	c.start("n1", declare)
	c.allServe(1, "n1")
	in := func(group, subgroup string) func(*config.Config) {
		return func(cfg *config.Config) { declare(cfg); cfg.Node.Group, cfg.Node.Subgroup = group, subgroup }
	}
	c.start("n2", in("edge", "eu"))
	c.start("n3", in("edge", "ue"))
	c.start("n4", in("default", "default"))
	type node struct {
		State       string
		HeldReasons []string
	}
	want := map[string]string{"n2": "ACTIVE", "n3": "PASSIVE", "n4": "ACTIVE"}
	for id, state := range want {
		eventually(t, waitTimeout, id+" "+state, func() error {
			var n node
			if code := call(t, http.MethodGet, c.base("n1")+"/v1/nodes/"+id, "", &n); code != 200 || n.State != state {
				return fmt.Errorf("%s: %d %+v", id, code, n)
			}
			return nil
		})
	}
	var n3 node
	call(t, http.MethodGet, c.base("n1")+"/v1/nodes/n3", "", &n3)
	if len(n3.HeldReasons) != 1 || !strings.Contains(n3.HeldReasons[0], `subgroup "ue" of group "edge"`) {
		t.Fatalf("n3 held for %q", n3.HeldReasons)
	}
}

// BenchmarkCompileGroup compiles a 40-policy tree in 4 groups as a node
// of one group does and as every node did before (the whole tree).
func BenchmarkCompileGroup(b *testing.B) {
	files := map[string][]byte{}
	for i := range 40 {
		var sb strings.Builder
		fmt.Fprintf(&sb, "group = \"g%d\"\ndefault_action = \"deny\"\n", i%4)
		for r := range 20 {
			fmt.Fprintf(&sb, "[[rules]]\nname = \"r%d\"\npriority = %d\naction = \"allow\"\nmatch = 'request.path.startsWith(\"/p%d/\") && request.method == \"GET\"'\n", r, r, r)
		}
		files[fmt.Sprintf("p%d/policy.toml", i)] = []byte(sb.String())
	}
	for _, bc := range []struct{ name, group string }{{"whole-tree", ""}, {"one-group", "g1"}} {
		b.Run(bc.name, func(b *testing.B) {
			compile := compileFor(bc.group, policy.LoadOptions{}, engine.DefaultOptions())
			b.ReportAllocs()
			for b.Loop() {
				if bundle, problems := compile(files); bundle == nil {
					b.Fatal(problems)
				}
			}
		})
	}
}
