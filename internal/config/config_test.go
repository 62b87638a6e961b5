package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/policyrollout/reconciler/internal/policy"
)

const contractExample = `
[node]
id = "node-2"
data_dir = "data/node-2"
http_addr = "127.0.0.1:8182"
raft_addr = "127.0.0.1:8301"
bootstrap = false
join = ["127.0.0.1:8181"]
group = "edge"
subgroup = "eu"

[git]
url = "data/policies.git"
branch = "main"
path = "policies"
init_from = "policies.example"
poll = "@every 10s"

[github]
repository = "owner/name"
api_url = "https://api.github.com/"
token_env = "GITHUB_TOKEN"
webhook_secret_env = "GITHUB_WEBHOOK_SECRET"

[preview]
auto_start = false
max_experiments_per_policy = 3
summary = "@every 1m"

[policy]
merge_default = "override"

[api]
token_env = "RECONCILER_TOKEN"
trusted_proxies = ["10.0.0.0/8", "::1", "127.0.0.1"]
max_body_bytes = 2048

[log]
level = "debug"
format = "json"
`

func writeConfig(t *testing.T, content string) string {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestLoadContractExample(t *testing.T) {
	path := writeConfig(t, contractExample)
	c, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Dir(path)
	want := Node{
		ID: "node-2", DataDir: filepath.Join(dir, "data/node-2"),
		HTTPAddr: "127.0.0.1:8182", RaftAddr: "127.0.0.1:8301", Voter: true,
		Join: []string{"127.0.0.1:8181"}, Group: "edge", Subgroup: "eu",
	}
	if !reflect.DeepEqual(c.Node, want) {
		t.Errorf("node = %+v, want %+v", c.Node, want)
	}
	if c.Git.URL != filepath.Join(dir, "data/policies.git") || c.Git.InitFrom != filepath.Join(dir, "policies.example") {
		t.Errorf("paths not resolved against the config dir: %+v", c.Git)
	}
	if c.Git.Path != "policies" {
		t.Errorf("git.path = %q; it is inside the repository and must stay relative", c.Git.Path)
	}
	if !c.GitHub.Enabled() || c.Preview.AutoStart || c.Preview.MaxExperimentsPerPolicy != 3 {
		t.Errorf("github/preview = %+v %+v", c.GitHub, c.Preview)
	}
	if c.Policy.MergeDefault != policy.StrategyOverride {
		t.Errorf("merge_default = %q", c.Policy.MergeDefault)
	}
	if got := c.API.TrustedPrefixes(); len(got) != 3 || got[1].String() != "::1/128" || got[2].String() != "127.0.0.1/32" {
		t.Errorf("trusted prefixes = %v", got)
	}
	if c.API.MaxBodyBytes != 2048 || c.Log.Level != "debug" || c.Log.Format != "json" {
		t.Errorf("api/log = %+v %+v", c.API, c.Log)
	}
	if c.Path != path {
		t.Errorf("Path = %q", c.Path)
	}
}

func TestEmptyFileIsDefaults(t *testing.T) {
	c, err := Parse(nil, "")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(c, Default()) {
		t.Errorf("empty file = %+v, want defaults %+v", c, Default())
	}
	if err := Default().Validate(); err != nil {
		t.Errorf("defaults do not validate: %v", err)
	}
}

func TestDataDirDefaultFollowsNodeID(t *testing.T) {
	c, err := Parse([]byte("[node]\nid = \"node-7\"\n"), "/etc/reconciler")
	if err != nil {
		t.Fatal(err)
	}
	if c.Node.DataDir != "/etc/reconciler/data/node-7" {
		t.Errorf("data_dir = %q", c.Node.DataDir)
	}
}

func TestRemoteGitURLIsNotResolved(t *testing.T) {
	for _, u := range []string{"https://github.com/o/r.git", "ssh://git@h/o/r.git", "git@github.com:o/r.git", "file:///srv/r.git"} {
		c, err := Parse([]byte("[git]\nurl = \""+u+"\"\n"), "/base")
		if err != nil {
			t.Fatalf("%s: %v", u, err)
		}
		if c.Git.URL != u {
			t.Errorf("git.url %q became %q", u, c.Git.URL)
		}
	}
	c, err := Parse([]byte("[git]\nurl = \"/abs/repo.git\"\n"), "/base")
	if err != nil || c.Git.URL != "/abs/repo.git" {
		t.Errorf("absolute path changed: %v %q", err, c.Git.URL)
	}
}

func TestUnknownKeyIsNamed(t *testing.T) {
	cases := map[string]string{
		"[node]\nidd = \"x\"\n":              `"node.idd"`,
		"[nodes]\nid = \"x\"\n":              `"nodes.id"`,
		"[api]\ntoken = \"secret\"\n":        `"api.token"`,
		"top = 1\n":                          `"top"`,
		"[log]\nlevel=\"info\"\ncolor=1\n":   `"log.color"`,
		"[git]\nurl=\"x\"\n[git.extra]\na=1": `"git.extra`,
	}
	for in, want := range cases {
		_, err := Parse([]byte(in), "")
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: err = %v, want it to name %s", in, err, want)
		}
	}
}

func TestLoadNamesFileOnError(t *testing.T) {
	path := writeConfig(t, "[node]\nhttp_addr = \"nope\"\n")
	_, err := Load(path)
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "node.http_addr") {
		t.Errorf("err = %v", err)
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing.toml")); err == nil {
		t.Error("missing file loaded")
	}
}

func TestBadValues(t *testing.T) {
	cases := []struct{ in, key string }{
		{"[node]\nid = \"\"", "node.id"},
		{"[node]\nid = \"a b\"", "node.id"},
		{"[node]\nhttp_addr = \"8181\"", "node.http_addr"},
		{"[node]\nhttp_addr = \"host:99999\"", "node.http_addr"},
		{"[node]\nraft_addr = \"h:\"", "node.raft_addr"},
		{"[node]\njoin = [\"a:1\", \"b\"]", "node.join[1]"},
		{"[node]\nbootstrap = true\njoin = [\"a:1\"]", "node.bootstrap"},
		{"[node]\ngroup = \"\"", "node.group"},
		{"[node]\nfollow_timeout = \"500ms\"", "node.follow_timeout"},
		{"[node]\nfollow_timeout = \"2h\"", "node.follow_timeout"},
		{"[git]\nurl = \"\"", "git.url"},
		{"[git]\nurl = \"ftp://h/r\"", "git.url"},
		{"[git]\nurl = \"https://u:pw@h/r\"", "git.url"},
		{"[git]\nbranch = \"a b\"", "git.branch"},
		{"[git]\npath = \"../x\"", "git.path"},
		{"[git]\npoll = \"\"", "git.poll"},
		{"[git]\npoll = \"every 10s\"", "git.poll"},
		{"[git]\ntoken_env = \"A B\"", "git.token_env"},
		{"[git]\ntimeout = \"soon\"", "git.timeout"},
		{"[git]\ntimeout = \"0s\"", "git.timeout"},
		{"[git]\ntimeout = \"11m\"", "git.timeout"},
		{"[git]\ntimeout = 30", "git.timeout"},
		{"[node]\nraft_addr = \"0.0.0.0:8300\"", "node.raft_advertise_addr"},
		{"[node]\nhttp_addr = \"[::]:8181\"", "node.http_advertise_addr"},
		{"[node]\nhttp_advertise_addr = \"0.0.0.0:1\"", "node.http_advertise_addr"},
		{"[node]\nvoter = 1", "node.voter"},
		{"[github]\nrepository = \"noslash\"", "github.repository"},
		{"[github]\napi_url = \"ftp://x\"", "github.api_url"},
		{"[github]\ntoken_env = \"1BAD\"", "github.token_env"},
		{"[github]\nwebhook_secret_env = \"A-B\"", "github.webhook_secret_env"},
		{"[preview]\nmax_experiments_per_policy = 0", "preview.max_experiments_per_policy"},
		{"[preview]\nsummary = \" \"", "preview.summary"},
		{"[preview]\nmax_compiled_bytes = 0", "preview.max_compiled_bytes"},
		{"[policy]\nmerge_default = \"merge\"", "policy.merge_default"},
		{"[api]\ntoken_env = \"$X\"", "api.token_env"},
		{"[api]\ntrusted_proxies = [\"10.0.0.0/33\"]", "api.trusted_proxies[0]"},
		{"[api]\ntrusted_proxies = [\"10.0.0.1\", \"example.com\"]", "api.trusted_proxies[1]"},
		{"[api]\nmax_body_bytes = 0", "api.max_body_bytes"},
		{"[api]\nmax_body_bytes = 1_000_000_000", "api.max_body_bytes"},
		{"[api]\nmax_request_headers = 0", "api.max_request_headers"},
		{"[api]\nmax_request_headers = 10_001", "api.max_request_headers"},
		{"[api]\nmax_decisions_in_flight = 0", "api.max_decisions_in_flight"},
		{"[api]\nmax_decisions_in_flight = 100_001", "api.max_decisions_in_flight"},
		{"[api]\nmax_decision_bodies_per_source = 0", "api.max_decision_bodies_per_source"},
		{"[validation]\nmemory_limit_bytes = 1048576", "validation.memory_limit_bytes"},
		{"[validation]\nmemory_limit_bytes = 100_000_000_000", "validation.memory_limit_bytes"},
		{"[validation]\nmemory_limit_bytes = \"1GiB\"", "validation.memory_limit_bytes"},
		{"[validation]\ntimeout = \"0s\"", "validation.timeout"},
		{"[git]\nrepack_memory_limit_bytes = 0", "git.repack_memory_limit_bytes"},
		{"[git]\nrepack_memory_limit_bytes = 1048576", "git.repack_memory_limit_bytes"},
		{"[git]\nrepack_memory_limit_bytes = 100_000_000_000", "git.repack_memory_limit_bytes"},
		{"[git]\nrepack_memory_limit_bytes = \"512MiB\"", "git.repack_memory_limit_bytes"},
		{"[validation]\ntimeout = \"11m\"", "validation.timeout"},
		{"[validation]\ntimeout = 30", "validation.timeout"},
		{"[log]\nlevel = \"loud\"", "log.level"},
		{"[log]\nformat = \"xml\"", "log.format"},
		// Wrong TOML types are decoding errors that name the key.
		{"[node]\nbootstrap = \"yes\"", "node.bootstrap"},
		{"[api]\nmax_body_bytes = \"1MiB\"", "api.max_body_bytes"},
		{"[node]\njoin = \"a:1\"", "node.join"},
		{"[groups.\"a b\"]\nsubgroups = []", "groups.a b"},
		{"[groups.edge]\nsubgroups = [\"eu\", \"eu\"]", "groups.edge.subgroups"},
		{"[groups.edge]\nsubgroups = [\"default\"]", "groups.edge.subgroups"},
		{"[groups.edge]\nsubgroups = [\"\"]", "groups.edge.subgroups"},
		{"[groups.edge]\nsubgroup = [\"eu\"]", "groups.edge.subgroup"},
	}
	for _, tc := range cases {
		_, err := Parse([]byte(tc.in), "")
		if err == nil || !strings.Contains(err.Error(), tc.key) {
			t.Errorf("%q: err = %v, want one naming %s", tc.in, err, tc.key)
		}
	}
}

// TestValidationLimits: [validation] sets the validation child's bounds;
// a file without it keeps the defaults (1 GiB, 30 s).
func TestValidationLimits(t *testing.T) {
	c, err := Parse([]byte("[validation]\nmemory_limit_bytes = 268435456\ntimeout = \"1m\"\n"), "")
	if err != nil {
		t.Fatal(err)
	}
	if c.Validation.MemoryLimitBytes != 256<<20 || c.Validation.Timeout.Duration != time.Minute {
		t.Errorf("validation = %+v", c.Validation)
	}
	if d := Default().Validation; d.MemoryLimitBytes != 1<<30 || d.Timeout.Duration != 30*time.Second {
		t.Errorf("default validation = %+v", d)
	}
}

func TestGroupsDeclareSubgroups(t *testing.T) {
	c, err := Parse([]byte("[groups.edge]\nsubgroups = [\"eu\", \"us\"]\n[groups.core]\n"), "")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{"edge": {"default", "eu", "us"}, "core": {"default"}}
	if got := c.DeclaredSubgroups(); !reflect.DeepEqual(got, want) {
		t.Errorf("declared %v, want %v", got, want)
	}
}

func TestAllProblemsReported(t *testing.T) {
	_, err := Parse([]byte("[node]\nhttp_addr = \"x\"\n[log]\nformat = \"xml\"\n"), "")
	if err == nil || !strings.Contains(err.Error(), "node.http_addr") || !strings.Contains(err.Error(), "log.format") {
		t.Errorf("err = %v, want both problems", err)
	}
}

func TestSecretReadsOnlyNamedVariables(t *testing.T) {
	t.Setenv("RECONCILER_TOKEN", "api-secret")
	t.Setenv("MY_GH_TOKEN", "gh-secret")
	t.Setenv("GITHUB_WEBHOOK_SECRET", "hook-secret")
	t.Setenv("HOME_SECRET", "nope")
	t.Setenv("GIT_TOKEN", "git-secret")
	c, err := Parse([]byte("[github]\ntoken_env = \"MY_GH_TOKEN\"\n"), "")
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{
		c.API.TokenEnv:            "api-secret",
		c.GitHub.TokenEnv:         "gh-secret",
		c.GitHub.WebhookSecretEnv: "hook-secret",
		c.Git.TokenEnv:            "git-secret",
		"HOME_SECRET":             "",
		"GITHUB_TOKEN":            "", // not named by this config any more
		"":                        "",
	} {
		if got := c.Secret(name); got != want {
			t.Errorf("Secret(%q) = %q, want %q", name, got, want)
		}
	}
}

func TestIsLocalPath(t *testing.T) {
	for u, want := range map[string]bool{
		"data/policies.git": true, "/srv/r.git": true, "./r": true, "r": true,
		"https://h/r": false, "git@h:o/r.git": false, "h:r": false, "": false,
		"./a:b": true,
	} {
		if got := IsLocalPath(u); got != want {
			t.Errorf("IsLocalPath(%q) = %v, want %v", u, got, want)
		}
	}
}

func TestClusterKeys(t *testing.T) {
	c, err := Parse([]byte("[node]\nvoter = false\nraft_addr = \"0.0.0.0:8300\"\nraft_advertise_addr = \"10.0.0.5:8300\"\nhttp_advertise_addr = \"10.0.0.5:8181\"\n[git]\npoll = \"*/5 * * * *\"\n"), "")
	if err != nil {
		t.Fatal(err)
	}
	if c.Node.Voter || c.Node.RaftAdvertiseAddr != "10.0.0.5:8300" || c.Node.HTTPAdvertiseAddr != "10.0.0.5:8181" {
		t.Errorf("node = %+v", c.Node)
	}
	if !Default().Node.Voter {
		t.Error("nodes are voters by default")
	}
	c, err = Parse([]byte("[node]\nfollow_timeout = \"20s\"\n"), "")
	if err != nil || c.Node.FollowTimeout.Duration != 20*time.Second {
		t.Errorf("follow_timeout = %v %v", c.Node.FollowTimeout, err)
	}
}

func TestGitTokenAndTimeout(t *testing.T) {
	c, err := Parse([]byte("[git]\ntoken_env = \"MY_GIT_TOKEN\"\ntimeout = \"2m30s\"\n"), "")
	if err != nil {
		t.Fatal(err)
	}
	if c.Git.TokenEnv != "MY_GIT_TOKEN" || c.Git.Timeout.Duration != 150*time.Second {
		t.Errorf("git = %+v", c.Git)
	}
	d := Default().Git
	if d.TokenEnv != "GIT_TOKEN" || d.Timeout.Duration != 30*time.Second {
		t.Errorf("defaults = %+v", d)
	}
	if c, err := Parse([]byte("[git]\ntoken_env = \"\"\n"), ""); err != nil || c.Secret(c.Git.TokenEnv) != "" {
		t.Errorf("an empty token_env: %v", err)
	}
	for url, seeds := range map[string]bool{"data/p.git": true, "https://h/r.git": false, "git@h:r.git": false} {
		g := Git{URL: url, InitFrom: "x"}
		if g.SeedsURL() != seeds {
			t.Errorf("SeedsURL(%q) = %v", url, !seeds)
		}
	}
	if (Git{URL: "data/p.git"}).SeedsURL() {
		t.Error("no init_from seeds")
	}
}

func TestPreviewThresholds(t *testing.T) {
	c, err := Parse([]byte(`[preview.thresholds."*"]
max_allow_to_deny_ratio = 0.01
max_deny_to_allow_ratio = 0.2

[preview.thresholds.web]
max_deny_to_allow_ratio = 0
`), "")
	if err != nil {
		t.Fatal(err)
	}
	if a, d := c.Preview.ThresholdsFor("web"); a != 0.01 || d != 0 {
		t.Errorf("web = %v %v", a, d)
	}
	if a, d := c.Preview.ThresholdsFor("api"); a != 0.01 || d != 0.2 {
		t.Errorf("api = %v %v", a, d)
	}
	if a, d := Default().Preview.ThresholdsFor("web"); a != 0 || d != 0 {
		t.Errorf("default = %v %v", a, d)
	}
	for in, want := range map[string]string{
		"[preview.thresholds.web]\nmax_allow_to_deny = 0.1\n":        `unknown key "preview.thresholds.web.max_allow_to_deny"`,
		"[preview.thresholds.web]\nmax_allow_to_deny_ratio = 1.5\n":  "preview.thresholds.web.max_allow_to_deny_ratio: 1.5 must be between 0 (off) and 1",
		"[preview.thresholds.\"*\"]\nmax_deny_to_allow_ratio = -1\n": "preview.thresholds.*.max_deny_to_allow_ratio",
		"[preview.thresholds.Web]\nmax_deny_to_allow_ratio = 0.1\n":  `preview.thresholds.Web: "Web" must be "*" or a policy name`,
	} {
		if _, err := Parse([]byte(in), ""); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want %q", in, err, want)
		}
	}
}
