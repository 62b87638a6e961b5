// Package policy reads the policy repository format of CONTRACT.md §1:
// policy directories, policy.toml, fragments, includes, rules and tests, and
// composes each policy from its files with Keystone's FAIL/OVERRIDE/MAINTAIN
// conflict strategies. It knows nothing of CEL or git: callers hand it an
// fs.FS (a directory, or a git tree) and get merged, canonical policies back.
package policy

// Strategy is a conflict strategy for two rules (or tests) of the same name,
// as in OpenStack Keystone's policy merge.
type Strategy string

// The conflict strategies.
const (
	StrategyFail     Strategy = "fail"
	StrategyOverride Strategy = "override"
	StrategyMaintain Strategy = "maintain"
)

// Action is what a rule or a policy default decides.
type Action string

// The actions.
const (
	ActionAllow Action = "allow"
	ActionDeny  Action = "deny"
)

// OnError says what a rule whose match fails at run time means.
type OnError string

// The on_error choices.
const (
	OnErrorDeny  OnError = "deny"
	OnErrorAllow OnError = "allow"
	OnErrorSkip  OnError = "skip"
)

// DefaultGroup is the group of a policy.toml without a group key.
const DefaultGroup = "default"

// Pos is where something was defined, so that errors can name file and line.
// File is slash-separated and relative to the policies root.
type Pos struct {
	File string `json:"-" toml:"-"`
	Line int    `json:"-" toml:"-"`
}

// Rule is one Cloud-Armor-style rule: lower priority first, ties by name.
type Rule struct {
	Name        string `json:"name" toml:"name"`
	Priority    int64  `json:"priority" toml:"priority"`
	Action      Action `json:"action" toml:"action"`
	Match       string `json:"match" toml:"match"`
	Description string `json:"description,omitempty" toml:"description,omitempty"`
	// Preview marks a rule that is evaluated beside the live policy and
	// counted as if enforced, but never decides (Cloud Armor's preview,
	// AWS WAF's Count): the engine leaves it out of the decision and the
	// preview runtime evaluates the policy with it enforced.
	Preview bool `json:"preview,omitempty" toml:"preview,omitempty"`
	Pos     Pos  `json:"-" toml:"-"`
}

// Test is a policy test: one request and the decision it must get.
// Rule is nil when the test does not care which rule decides; a pointer to ""
// means the default action must decide.
type Test struct {
	Name string `json:"name" toml:"name"`
	// Request holds JSON values only, as a decision request would: string,
	// bool, int64, float64 (finite), []any and map[string]any. Load turns
	// TOML datetimes into RFC 3339 strings (offset datetimes in UTC).
	Request map[string]any `json:"request" toml:"request"`
	Expect  Action         `json:"expect" toml:"expect"`
	Rule    *string        `json:"rule,omitempty" toml:"rule,omitempty"`
	Pos     Pos            `json:"-" toml:"-"`
}

// Policy is one merged policy: the result of composing policy.toml, its
// includes and its fragments. Rules are sorted by (priority, name) and
// Tests by name, so two layouts of the same content compare equal.
type Policy struct {
	// Name is the policy directory's name. It is not a key of policy.toml,
	// hence no TOML name.
	Name          string  `json:"name" toml:"-"`
	Description   string  `json:"description,omitempty" toml:"description,omitempty"`
	DefaultAction Action  `json:"default_action" toml:"default_action"`
	Group         string  `json:"group" toml:"group"`
	OnError       OnError `json:"on_error" toml:"on_error"`
	Rules         []Rule  `json:"rules" toml:"rules"`
	Tests         []Test  `json:"tests,omitempty" toml:"tests,omitempty"`
	// Sources are the files this policy was composed from, in merge order.
	Sources []string `json:"-" toml:"-"`
	// Lists are the named lists (_lists/) its rules use, by name. Their
	// hashes are part of the canonical form, so the etag changes with them.
	// JSON carries them without their data (List).
	Lists Lists `json:"lists,omitempty" toml:"-"`
}
