package outboxfx_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"path/filepath"
	"strings"
	"testing"
)

// TestNoConstructorForProvide checks that the package exports no function that
// provides the Outbox, its writer or its events: such a constructor, passed
// to fx.Provide, would build the outbox only when something depends on one of them, and
// an app with listeners but no such dependency would never start its dispatcher (see
// "Why only a module" in the package documentation). Module is the only way in.
func TestNoConstructorForProvide(t *testing.T) {
	t.Parallel()
	fset := token.NewFileSet()
	var files []*ast.File
	paths, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range paths {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	if len(files) == 0 {
		t.Fatal("no source files found")
	}
	// The outbox's own types, and the package's fx.Out structs, which provide anything.
	provides := map[string]bool{"*outbox.Outbox": true, "*outbox.Writer": true, "*outbox.Events": true}
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			ts, ok := n.(*ast.TypeSpec)
			if !ok {
				return true
			}
			if st, ok := ts.Type.(*ast.StructType); ok {
				for _, field := range st.Fields.List {
					if len(field.Names) == 0 && types.ExprString(field.Type) == "fx.Out" {
						provides[ts.Name.Name] = true
					}
				}
			}
			return true
		})
	}
	for _, f := range files {
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || !fn.Name.IsExported() || fn.Type.Results == nil {
				continue
			}
			for _, r := range fn.Type.Results.List {
				if typ := types.ExprString(r.Type); provides[typ] {
					t.Errorf("%s: exported func %s returns %s: a constructor for fx.Provide of the outbox; keep it unexported and behind Module",
						fset.Position(fn.Pos()), fn.Name.Name, typ)
				}
			}
		}
	}
}
