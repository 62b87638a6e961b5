package engine

import (
	"testing"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types"
)

// BenchmarkFieldAccess is the measurement behind newEnv's choice of
// ext.NativeTypes with a zero-cost activation: it compares binding
// `request` through a map per evaluation, and a hand-written
// types.Provider with direct field getters (the alternative to NativeTypes).
func BenchmarkFieldAccess(b *testing.B) {
	req := &Request{Principal: "alice", Headers: PairsOf(map[string]string{"user-agent": "bench"})}
	const src = `request.principal == 'bob' || request.headers['user-agent'] == 'bot'`
	env, err := celEnv()
	if err != nil {
		b.Fatal(err)
	}
	native := mustProgram(b, env, src)
	b.Run("native-types/activation", func(b *testing.B) {
		benchProgram(b, native, (*activation)(req))
	})
	b.Run("native-types/map", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _, _ = native.Eval(map[string]any{requestVar: req})
		}
	})
	custom, err := cel.NewEnv(cel.CustomTypeProvider(handProvider{mustRegistry(b)}),
		cel.Variable(requestVar, cel.ObjectType(handTypeName)))
	if err != nil {
		b.Fatal(err)
	}
	b.Run("hand-provider/activation", func(b *testing.B) {
		benchProgram(b, mustProgram(b, custom, src), (*activation)(req))
	})
}

func mustProgram(b *testing.B, env *cel.Env, src string) cel.Program {
	a, iss := env.Compile(src)
	if iss.Err() != nil {
		b.Fatal(iss.Err())
	}
	prg, err := env.Program(a, cel.EvalOptions(cel.OptOptimize))
	if err != nil {
		b.Fatal(err)
	}
	return prg
}

func benchProgram(b *testing.B, prg cel.Program, act *activation) {
	b.ReportAllocs()
	for b.Loop() {
		if out, _, err := prg.Eval(act); err != nil || out != types.False {
			b.Fatal(out, err)
		}
	}
}

func mustRegistry(b *testing.B) *types.Registry {
	reg, err := types.NewRegistry()
	if err != nil {
		b.Fatal(err)
	}
	return reg
}

const handTypeName = "bench.Request"

// handProvider declares two fields of Request by hand, with getters that
// read the struct directly: the best a custom provider could do.
type handProvider struct{ *types.Registry }

func (p handProvider) FindStructType(name string) (*types.Type, bool) {
	if name == handTypeName {
		return types.NewTypeTypeWithParam(types.NewObjectType(name)), true
	}
	return p.Registry.FindStructType(name)
}

func (p handProvider) FindStructFieldType(name, field string) (*types.FieldType, bool) {
	if name != handTypeName {
		return p.Registry.FindStructFieldType(name, field)
	}
	switch field {
	case "principal":
		return &types.FieldType{Type: types.StringType,
			IsSet:   func(o any) bool { return o.(*Request).Principal != "" },
			GetFrom: func(o any) (any, error) { return types.String(o.(*Request).Principal), nil }}, true
	case "headers":
		return &types.FieldType{Type: types.NewMapType(types.StringType, types.StringType),
			IsSet: func(o any) bool { return o.(*Request).Headers.Present() },
			GetFrom: func(o any) (any, error) {
				return types.NewStringStringMap(types.DefaultTypeAdapter, o.(*Request).Headers.Map()), nil
			}}, true
	}
	return nil, false
}
