// Package archtest measures the shape of the code for tests: how many
// methods each type declares, so that no type grows back into the god
// type the leader's parts were split out of (issue 26: at most 40).
package archtest

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
)

// MethodCounts counts the methods declared on each type in the non-test
// Go files below root, by "dir.Type" (dir relative to root, slashed).
// Methods promoted from embedded fields are not counted: they belong to
// the embedded type.
func MethodCounts(root string) (map[string]int, error) {
	counts := map[string]int{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return fmt.Errorf("archtest: %w", err)
		}
		dir, err := filepath.Rel(root, filepath.Dir(p))
		if err != nil {
			return fmt.Errorf("archtest: %w", err)
		}
		for _, decl := range f.Decls {
			if name := receiverType(decl); name != "" {
				counts[filepath.ToSlash(dir)+"."+name]++
			}
		}
		return nil
	})
	return counts, err
}

// receiverType is the name of the type decl is a method of, "" when decl
// is not a method.
func receiverType(decl ast.Decl) string {
	fd, ok := decl.(*ast.FuncDecl)
	if !ok || fd.Recv == nil || len(fd.Recv.List) == 0 {
		return ""
	}
	t := fd.Recv.List[0].Type
	if star, ok := t.(*ast.StarExpr); ok {
		t = star.X
	}
	switch g := t.(type) { // generic receivers: T[K] or T[K, V]
	case *ast.IndexExpr:
		t = g.X
	case *ast.IndexListExpr:
		t = g.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return id.Name
	}
	return ""
}
