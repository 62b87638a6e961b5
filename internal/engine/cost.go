package engine

import (
	"fmt"
	"time"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/cost"
	"cel.dev/cel-go/common/types"
)

// requestSizes gives the cost estimator the size of every part of a
// request. Without it CEL assumes unbounded strings and lists, and any rule
// that scans a string or loops over headers would estimate to "infinite".
type requestSizes struct{}

var _ cost.Estimator = requestSizes{}

// EstimateSize implements cost.Estimator. Paths start with the variable and
// continue with field names and '@keys', '@values' or '@items'.
func (requestSizes) EstimateSize(n cost.AstNode) *cost.SizeEstimate {
	path := n.Path()
	if len(path) < 2 || path[0] != requestVar {
		return nil
	}
	if isContainer(n.Type()) {
		return ranged(EstimatedMaxEntries)
	}
	// Strings, and dyn attribute values which may be strings.
	return ranged(EstimatedMaxStringBytes)
}

// EstimateCallCost implements cost.Estimator; the libraries model their own
// functions, and inIpRange is a constant-cost call.
func (requestSizes) EstimateCallCost(string, string, *cost.AstNode, []cost.AstNode) *cost.CallEstimate {
	return nil
}

func isContainer(t *types.Type) bool {
	if t == nil {
		return false
	}
	k := t.Kind()
	return k == types.MapKind || k == types.ListKind
}

func ranged(max uint64) *cost.SizeEstimate {
	s := cost.RangedSizeEstimate(0, max)
	return &s
}

// checkCost rejects a rule whose worst case exceeds the budget, and returns
// the estimate so the caller can compare it with the run-time limit.
func checkCost(env *cel.Env, a *cel.Ast, budget uint64) (uint64, error) {
	est, err := env.EstimateCost(a, requestSizes{})
	if err != nil {
		return 0, fmt.Errorf("cannot estimate cost: %v", err)
	}
	if est.Max > budget {
		return est.Max, fmt.Errorf("estimated worst-case cost %s exceeds the budget of %d per rule"+
			" (nested loops over request data, long regexes and string scans add up)", costString(est.Max), budget)
	}
	return est.Max, nil
}

// costString prints "unbounded" rather than 18446744073709551615.
func costString(c uint64) string {
	if c == ^uint64(0) {
		return "unbounded"
	}
	return fmt.Sprint(c)
}

// fitsEstimate reports whether every part of r is within the sizes that
// requestSizes gave the estimator: then a rule's actual cost is at most its
// estimate. Sizes are checked in bytes, which bounds CEL's code points.
func fitsEstimate(r *Request) bool {
	for _, s := range [...]string{r.Method, r.Path, r.RawPath, r.Host, r.Scheme, r.SourceIP, r.Principal} {
		if len(s) > EstimatedMaxStringBytes {
			return false
		}
	}
	if !fitsPairs(r.Query) || !fitsPairs(r.Headers) || len(r.Groups) > EstimatedMaxEntries {
		return false
	}
	for _, g := range r.Groups {
		if len(g) > EstimatedMaxStringBytes {
			return false
		}
	}
	return r.Attributes == nil || fitsValue(r.Attributes)
}

// maxDecodedGrowth is how much longer a string decoded from JSON can be
// than its text: an invalid UTF-8 byte becomes U+FFFD (3 bytes), a \u
// escape of 6 bytes at most 3; lower-casing a header name makes a 2-byte
// rune at most 3 bytes long.
const maxDecodedGrowth = 3

// fitsEstimateDecoded is fitsEstimate for r decoded from body bytes of
// JSON (0: unknown). Every string of a body of at most
// EstimatedMaxStringBytes/maxDecodedGrowth bytes is within the estimate,
// so only the entries need counting, where measuring their strings walks
// them.
func fitsEstimateDecoded(r *Request, body int) bool {
	if body <= 0 || body > EstimatedMaxStringBytes/maxDecodedGrowth {
		return fitsEstimate(r)
	}
	if r.Query.Len() > EstimatedMaxEntries || r.Headers.Len() > EstimatedMaxEntries || len(r.Groups) > EstimatedMaxEntries {
		return false
	}
	return r.Attributes == nil || fitsValue(r.Attributes)
}

func fitsPairs(p Pairs) bool {
	if p.Len() > EstimatedMaxEntries {
		return false
	}
	for _, e := range p.list {
		if len(e.Name) > EstimatedMaxStringBytes || len(e.Value) > EstimatedMaxStringBytes {
			return false
		}
	}
	return true
}

// fitsValue checks an attribute value of any depth. Anything it does not
// know is "does not fit", which only costs the tracked evaluation.
func fitsValue(v any) bool {
	switch x := v.(type) {
	case nil, bool, int64, float64, time.Time:
		return true
	case string:
		return len(x) <= EstimatedMaxStringBytes
	case []any:
		if len(x) > EstimatedMaxEntries {
			return false
		}
		for _, e := range x {
			if !fitsValue(e) {
				return false
			}
		}
		return true
	case map[string]any:
		if len(x) > EstimatedMaxEntries {
			return false
		}
		for k, e := range x {
			if len(k) > EstimatedMaxStringBytes || !fitsValue(e) {
				return false
			}
		}
		return true
	}
	return false
}
