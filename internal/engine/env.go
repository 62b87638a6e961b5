package engine

import (
	"fmt"
	"net/netip"
	"reflect"
	"regexp"
	"sync"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/ext"
	"cel.dev/cel-go/interpreter"
)

// requestVar is the name of the single CEL variable a match sees.
const requestVar = "request"

// requestTypeName is the CEL type of requestVar. ext.NativeTypes names a Go
// struct after its package and type, so it follows from Request's location.
const requestTypeName = "engine.Request"

// inIPRangeFunc is the Cloud Armor function kept for users migrating rules.
const inIPRangeFunc = "inIpRange"

// The environment is the same for every policy and costly to build (it
// reflects over Request and installs three libraries), so it is built once.
var (
	envOnce   sync.Once
	sharedEnv *cel.Env
	envErr    error
)

// celEnv returns the shared, immutable CEL environment of every match.
func celEnv() (*cel.Env, error) {
	envOnce.Do(func() { sharedEnv, envErr = newEnv() })
	return sharedEnv, envErr
}

// newEnv declares `request` as a typed object rather than a map, so that a
// misspelt field (request.pth) is a compile error, not a run-time one.
// ext.NativeTypes reads fields through precomputed struct offsets, and the
// json tags are the field names so that CEL and the JSON API never disagree;
// see BenchmarkFieldAccess for the comparison that chose it. memoFields,
// last, lets an Evaluate call build each field's CEL value once (memo.go).
func newEnv() (*cel.Env, error) {
	return cel.NewEnv(
		ext.NativeTypes(ext.ParseStructTag("json"), reflect.TypeFor[Request]()),
		cel.Variable(requestVar, cel.ObjectType(requestTypeName)),
		ext.Network(),
		ext.Strings(),
		inIPRangeLib(),
		listLib(),
		cel.ASTValidators(
			cel.ValidateDurationLiterals(),
			cel.ValidateTimestampLiterals(),
			cel.ValidateHomogeneousAggregateLiterals(),
			cel.ValidateComprehensionNestingLimit(MaxComprehensionDepth),
			regexLiteralValidator{},
			cidrLiteralValidator{},
		),
		cel.RegexProgramSizeLimit(MaxRegexProgramSize),
		cel.ParserExpressionSizeLimit(MaxMatchLength),
		cel.ParserRecursionLimit(maxParserRecursion),
		memoFields(),
	)
}

// inIPRangeLib declares inIpRange(ip string, cidr string) bool.
func inIPRangeLib() cel.EnvOption {
	return cel.Function(inIPRangeFunc,
		cel.Overload("in_ip_range_string_string",
			[]*cel.Type{cel.StringType, cel.StringType}, cel.BoolType,
			cel.BinaryBinding(inIPRangeBinding)))
}

// inIPRangeBinding follows Cloud Armor: an address that does not parse is
// simply not in the range (false), while a range that does not parse is the
// policy author's mistake and an error (a literal one fails at compile time).
func inIPRangeBinding(lhs, rhs ref.Val) ref.Val {
	ip, ok1 := lhs.(types.String)
	cidr, ok2 := rhs.(types.String)
	if !ok1 || !ok2 {
		return types.MaybeNoSuchOverloadErr(lhs)
	}
	prefix, err := parseRangeLiteral(string(cidr))
	if err != nil {
		return types.WrapErr(err)
	}
	addr, ok := parseLenientIP(string(ip))
	return types.Bool(ok && prefix.Contains(addr))
}

// parseRangeLiteral parses an inIpRange range with the rules of the network
// extension's cidr(): no zones and no IPv4-mapped IPv6 ranges, which could
// never contain an address as parseLenientIP returns it.
func parseRangeLiteral(s string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("inIpRange: invalid range %q: %v", s, err)
	}
	if p.Addr().Zone() != "" || p.Addr().Is4In6() {
		return netip.Prefix{}, fmt.Errorf("inIpRange: range %q must be plain IPv4 or IPv6", s)
	}
	return p.Masked(), nil
}

// parseLenientIP is the address parsing of inIpRange: IPv4-mapped IPv6
// addresses are unmapped, because dual-stack listeners report IPv4 clients
// that way and operators write IPv4 ranges. Zoned addresses match no range.
// The rule index uses this same function, so both agree by construction.
func parseLenientIP(s string) (netip.Addr, bool) {
	a, err := netip.ParseAddr(s)
	if err != nil || a.Zone() != "" {
		return netip.Addr{}, false
	}
	return a.Unmap(), true
}

// parseIP parses source_ip once for the index: lenient as parseLenientIP
// (addr is that result), and strict as the network extension's ip() and
// containsIP(string), which refuse zones and IPv4-mapped IPv6 addresses.
// Where strict parsing fails those functions error, so for the index the
// extension's forms are then "unknown", never "false".
func parseIP(s string) (addr netip.Addr, lenient, strict bool) {
	a, err := netip.ParseAddr(s)
	if err != nil || a.Zone() != "" {
		return netip.Addr{}, false, false
	}
	return a.Unmap(), true, !a.Is4In6()
}

// activation binds `request` without building a map per evaluation: a
// *Request converts to *activation for free and back again in ResolveName.
// Evaluate binds an evalState instead, which also memoises field values
// (memo.go); activation reads every field afresh, as tests compare.
type activation Request

var _ interpreter.Activation = (*activation)(nil)

// ResolveName implements interpreter.Activation.
func (a *activation) ResolveName(name string) (any, bool) {
	if name == requestVar {
		return (*Request)(a), true
	}
	return nil, false
}

// Parent implements interpreter.Activation; there is no enclosing scope.
func (a *activation) Parent() interpreter.Activation { return nil }

// regexLiteralValidator insists that regex patterns are short, valid literals:
// a pattern taken from the request would be compiled on every evaluation
// and let a client choose the regex, and a huge literal is a cost bomb.
type regexLiteralValidator struct{}

// Name implements cel.ASTValidator.
func (regexLiteralValidator) Name() string { return "reconciler.regex_literal" }

// Validate implements cel.ASTValidator.
func (regexLiteralValidator) Validate(_ *cel.Env, _ cel.ValidatorConfig, a *ast.AST, iss *cel.Issues) {
	root := ast.NavigateAST(a)
	for _, call := range ast.MatchDescendants(root, ast.FunctionMatcher("matches")) {
		args := call.AsCall().Args()
		pattern := args[len(args)-1]
		if pattern.Kind() != ast.LiteralKind {
			iss.ReportErrorAtID(pattern.ID(), "the pattern of matches() must be a string literal")
			continue
		}
		s, _ := pattern.AsLiteral().Value().(string)
		if len(s) > MaxRegexLength {
			iss.ReportErrorAtID(pattern.ID(), "regex of %d bytes is longer than the limit of %d", len(s), MaxRegexLength)
		} else if _, err := regexp.Compile(s); err != nil {
			iss.ReportErrorAtID(pattern.ID(), "invalid regex: %v", err)
		}
	}
}

// cidrLiteralValidator rejects inIpRange ranges that are literals and do not
// parse, so a typo fails validation of the pull request, not a request.
type cidrLiteralValidator struct{}

// Name implements cel.ASTValidator.
func (cidrLiteralValidator) Name() string { return "reconciler.in_ip_range_literal" }

// Validate implements cel.ASTValidator.
func (cidrLiteralValidator) Validate(_ *cel.Env, _ cel.ValidatorConfig, a *ast.AST, iss *cel.Issues) {
	root := ast.NavigateAST(a)
	for _, call := range ast.MatchDescendants(root, ast.FunctionMatcher(inIPRangeFunc)) {
		args := call.AsCall().Args()
		if len(args) != 2 || args[1].Kind() != ast.LiteralKind {
			continue
		}
		s, _ := args[1].AsLiteral().Value().(string)
		if _, err := parseRangeLiteral(s); err != nil {
			iss.ReportErrorAtID(args[1].ID(), "%v", err)
		}
	}
}
