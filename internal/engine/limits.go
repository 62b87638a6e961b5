package engine

import (
	"errors"
	"sync/atomic"

	"github.com/policyrollout/reconciler/internal/policy"
)

// Budgets. docs/policy-language.md documents every one of these; change
// both together. Costs are in CEL cost units (roughly one unit per node
// visited or per ten bytes of string scanned).
const (
	// MaxRuleCost is the highest worst-case cost a rule's match may have,
	// as estimated at compile time from the sizes below. A rule above it is
	// rejected when its policy is validated, naming the rule and its line.
	MaxRuleCost uint64 = 100_000

	// RuntimeCostLimit stops one evaluation of one match once its actual
	// cost passes this many units; the match then counts as a run-time error
	// and the policy's on_error applies. It is ten times MaxRuleCost so that
	// it only fires on requests bigger than the estimate assumes.
	RuntimeCostLimit uint64 = 1_000_000

	// MaxRegexLength is the longest regex literal allowed in matches(), in
	// bytes. Longer patterns are almost always generated lists that belong
	// in `in [...]` or in several rules.
	MaxRegexLength = 1024

	// MaxRegexProgramSize bounds the compiled size of a regex (RE2 program
	// instructions), which catches short patterns with large repetitions.
	MaxRegexProgramSize = 10_000

	// MaxComprehensionDepth is how deeply all/exists/map/filter may nest:
	// each level multiplies the work by the size of a list.
	MaxComprehensionDepth = 2

	// MaxMatchLength is the longest match expression, in code points.
	MaxMatchLength = 16 * 1024

	// maxParserRecursion bounds the parse tree depth, so that deeply nested
	// parentheses in an untrusted match fail cleanly instead of using stack.
	maxParserRecursion = 100
)

// Size assumptions of the compile-time cost estimate. Requests may be
// bigger; RuntimeCostLimit then guards the evaluation.
const (
	// EstimatedMaxStringBytes is the assumed length of any string in a
	// request: a field, a header or query value, a group or an attribute.
	EstimatedMaxStringBytes = 8 * 1024

	// EstimatedMaxEntries is the assumed number of entries of any map or
	// list in a request (query, headers, groups, attributes).
	EstimatedMaxEntries = 64
)

// Options tune compilation. Zero budgets mean the documented defaults, so
// Options{} and DefaultOptions() compile alike.
type Options struct {
	// MaxRuleCost is the compile-time budget of one rule (see MaxRuleCost).
	MaxRuleCost uint64
	// RuntimeCostLimit is the run-time limit of one match evaluation
	// (see RuntimeCostLimit).
	RuntimeCostLimit uint64
	// DisableIndex evaluates every rule in priority order, without the rule
	// index. Decisions are identical either way; it exists for tests and to
	// rule the index out when investigating.
	DisableIndex bool
	// FindList returns the data of a list the policy names by hash
	// without its data (an experiment's policy from the raft log) when no
	// compiled copy is held: a node's preview finds it in the replicated
	// state. The content is checked against the hash; nil means none.
	// A pointer, so that Options stay comparable; never sent to the
	// validation child.
	FindList *ListFinder `json:"-"`
	// Abort, once it holds true, stops a compile between two rules with
	// ErrAborted: a node shutting down does not wait for the compile of a
	// large experiment it has begun (seconds for the heaviest policy the
	// budgets admit). A pointer, so that Options stay comparable; never
	// sent to the validation child.
	Abort *atomic.Bool `json:"-"`
	// lists are the compiled lists of the policy being compiled, which
	// its programs are bound to (set by compilePolicy).
	lists *policyLists
}

// ErrAborted is the error of a compile stopped by Options.Abort.
var ErrAborted = errors.New("engine: compile aborted")

// aborted reports whether the compile o belongs to was asked to stop.
func (o Options) aborted() bool { return o.Abort != nil && o.Abort.Load() }

// ListFinder finds the data of a list by its content (Options.FindList).
type ListFinder struct {
	Find func(l *policy.List) []byte
}

// DefaultOptions returns the documented budgets with the index enabled.
func DefaultOptions() Options {
	return Options{MaxRuleCost: MaxRuleCost, RuntimeCostLimit: RuntimeCostLimit}
}

// withDefaults fills zero budgets, so that Options{DisableIndex: true}
// does not mean "no rule may cost anything".
func (o Options) withDefaults() Options {
	if o.MaxRuleCost == 0 {
		o.MaxRuleCost = MaxRuleCost
	}
	if o.RuntimeCostLimit == 0 {
		o.RuntimeCostLimit = RuntimeCostLimit
	}
	return o
}
