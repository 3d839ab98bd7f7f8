package main

import (
	"errors"
	"fmt"
	"go/constant"
	"go/types"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/tools/go/packages"
)

// excludedTop are the top-level directories whose packages are not public API.
var excludedTop = map[string]bool{"internal": true, "examples": true, "cmd": true}

// excludedDir reports whether rel (a slash-separated directory relative to the
// repository root, "." for the root) holds no public API: anything under internal/,
// examples/ or cmd/ at the top, any internal or testdata directory at any depth, and
// directories the go command ignores (names starting with "." or "_").
func excludedDir(rel string) bool {
	if rel == "." {
		return false
	}
	parts := strings.Split(rel, "/")
	if excludedTop[parts[0]] {
		return true
	}
	for _, p := range parts {
		if p == "internal" || p == "testdata" || p == "vendor" || strings.HasPrefix(p, ".") || strings.HasPrefix(p, "_") {
			return true
		}
	}
	return false
}

// moduleDirs returns the directories below root (root included) that hold a go.mod,
// skipping excluded directories.
func moduleDirs(root string) ([]string, error) {
	var dirs []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		if excludedDir(filepath.ToSlash(rel)) {
			return filepath.SkipDir
		}
		if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
			dirs = append(dirs, path)
		}
		return nil
	})
	sort.Strings(dirs)
	return dirs, err
}

// fileName is the record file of the package in directory rel: "core/adapterkit"
// becomes "core_adapterkit.txt", the repository root "root.txt".
func fileName(rel string) string {
	if rel == "." {
		return "root.txt"
	}
	return strings.ReplaceAll(rel, "/", "_") + ".txt"
}

// generate loads every public package below root and returns the record: file name
// (relative to api/) to its content.
func generate(root string) (map[string]string, error) {
	root, err := filepath.Abs(root)
	if err != nil {
		return nil, err
	}
	mods, err := moduleDirs(root)
	if err != nil {
		return nil, err
	}
	if len(mods) == 0 {
		return nil, fmt.Errorf("no go.mod below %s", root)
	}
	env := os.Environ()
	// The Makefile builds this tool with GOWORK=off (its module is in no workspace) and
	// passes the caller's GOWORK here, so the repository's packages load as the caller
	// would build them (in workspace mode when a go.work exists).
	if v, ok := os.LookupEnv("APIRECORD_GOWORK"); ok {
		env = append(env, "GOWORK="+v)
	}
	files := map[string]string{}
	owner := map[string]string{} // file name -> import path
	for _, mod := range mods {
		cfg := &packages.Config{
			Mode: packages.NeedName | packages.NeedFiles | packages.NeedTypes | packages.NeedModule,
			Dir:  mod,
			Env:  env,
		}
		pkgs, err := packages.Load(cfg, "./...")
		if err != nil {
			return nil, fmt.Errorf("loading packages in %s: %w", mod, err)
		}
		var errs []string
		for _, p := range pkgs {
			// In workspace mode "./..." also matches nested workspace modules: each
			// package is taken from the module that contains it.
			if p.Module == nil || filepath.Clean(p.Module.Dir) != filepath.Clean(mod) {
				continue
			}
			if p.Name == "main" || len(p.GoFiles) == 0 {
				continue
			}
			dir := filepath.Dir(p.GoFiles[0])
			rel, err := filepath.Rel(root, dir)
			if err != nil {
				return nil, err
			}
			rel = filepath.ToSlash(rel)
			if excludedDir(rel) {
				continue
			}
			if len(p.Errors) > 0 {
				// A package that does not compile is reported by go list (the
				// compiler's messages) and again by the type checker: the first
				// kind present is enough.
				kind := p.Errors[0].Kind
				for _, e := range p.Errors {
					kind = min(kind, e.Kind)
				}
				for _, e := range p.Errors {
					if e.Kind == kind {
						errs = append(errs, strings.TrimPrefix(e.Error(), "-: "))
					}
				}
				continue
			}
			name := fileName(rel)
			if prev, dup := owner[name]; dup && prev != p.PkgPath {
				return nil, fmt.Errorf("packages %s and %s would both be recorded in api/%s", prev, p.PkgPath, name)
			}
			owner[name] = p.PkgPath
			lines := packageLines(p.Types)
			files[name] = strings.Join(lines, "\n")
			if len(lines) > 0 {
				files[name] += "\n"
			}
		}
		if len(errs) > 0 {
			return nil, errors.New(strings.Join(errs, "\n"))
		}
	}
	return files, nil
}

// packageLines returns the sorted record lines of pkg, one per exported feature.
func packageLines(pkg *types.Package) []string {
	w := &writer{pkg: pkg}
	prefix := "pkg " + pkg.Path() + ", "
	set := map[string]bool{}
	emit := func(s string) { set[prefix+s] = true }
	scope := pkg.Scope()
	for _, name := range scope.Names() {
		obj := scope.Lookup(name)
		if !obj.Exported() {
			continue
		}
		switch obj := obj.(type) {
		case *types.Const:
			emit("const " + name + " = " + constString(obj.Val()))
			emit("const " + name + " " + w.constType(obj.Type()))
		case *types.Var:
			emit("var " + name + " " + w.typ(obj.Type()))
		case *types.Func:
			sig := obj.Type().(*types.Signature)
			w.tparams = sig.TypeParams()
			emit("func " + name + w.typeParamList(sig.TypeParams()) + w.signature(sig))
			w.tparams = nil
		case *types.TypeName:
			for _, l := range w.typeLines(obj) {
				emit(l)
			}
		}
	}
	lines := make([]string, 0, len(set))
	for l := range set {
		lines = append(lines, l)
	}
	sort.Strings(lines)
	return lines
}

// quoteTag writes a struct tag as in source: in back quotes when it can be.
func quoteTag(tag string) string {
	if strings.ContainsAny(tag, "`\n") {
		return strconv.Quote(tag)
	}
	return "`" + tag + "`"
}

func constString(v constant.Value) string {
	switch v.Kind() {
	case constant.String:
		return strconv.Quote(constant.StringVal(v))
	case constant.Float:
		if f, exact := constant.Float64Val(v); exact {
			return strconv.FormatFloat(f, 'g', -1, 64)
		}
	}
	return v.ExactString()
}

// writer writes types the way Go's api files do: types of the recorded package
// unqualified, others qualified with their package name, no parameter names, and
// type parameters numbered $0, $1, ... so that renaming one changes nothing.
type writer struct {
	pkg     *types.Package
	tparams *types.TypeParamList // the declaration's type parameters
	rparams *types.TypeParamList // a method's receiver type parameters
}

func (w *writer) constType(t types.Type) string {
	if b, ok := t.(*types.Basic); ok && b.Info()&types.IsUntyped != 0 {
		switch b.Kind() {
		case types.UntypedBool:
			return "ideal-bool"
		case types.UntypedInt:
			return "ideal-int"
		case types.UntypedRune:
			return "ideal-rune"
		case types.UntypedFloat:
			return "ideal-float"
		case types.UntypedComplex:
			return "ideal-complex"
		case types.UntypedString:
			return "ideal-string"
		}
	}
	return w.typ(t)
}

// typeLines returns the lines of the exported type declared by obj: the type itself,
// its exported struct fields or interface methods, and its exported methods.
func (w *writer) typeLines(obj *types.TypeName) []string {
	name := obj.Name()
	var lines []string
	if alias, ok := obj.Type().(*types.Alias); ok {
		w.tparams = alias.TypeParams()
		lines = append(lines, "type "+name+w.typeParamList(alias.TypeParams())+" = "+w.typ(alias.Rhs()))
		w.tparams = nil
		return lines
	}
	named, ok := obj.Type().(*types.Named)
	if !ok { // cannot happen for a package-level type name
		return []string{"type " + name + " " + w.typ(obj.Type())}
	}
	w.tparams = named.TypeParams()
	defer func() { w.tparams = nil }()
	decl := "type " + name + w.typeParamList(named.TypeParams())
	switch u := named.Underlying().(type) {
	case *types.Struct:
		lines = append(lines, decl+" struct")
		for i := 0; i < u.NumFields(); i++ {
			f := u.Field(i)
			if !f.Exported() {
				continue
			}
			line := decl + " struct, " + f.Name() + " " + w.typ(f.Type())
			if f.Embedded() {
				line = decl + " struct, embedded " + w.typ(f.Type())
			}
			// Unlike Go's api files the tag is recorded: fx reads group, name and
			// optional tags, encoding/json its keys.
			if tag := u.Tag(i); tag != "" {
				line += " " + quoteTag(tag)
			}
			lines = append(lines, line)
		}
	case *types.Interface:
		if !u.IsMethodSet() {
			// A constraint: its type set is the feature.
			lines = append(lines, decl+" "+w.typ(u))
			break
		}
		var names []string
		unexported := false
		for i := 0; i < u.NumMethods(); i++ {
			m := u.Method(i)
			if !m.Exported() {
				unexported = true
				continue
			}
			names = append(names, m.Name())
			lines = append(lines, decl+" interface, "+m.Name()+w.signature(m.Type().(*types.Signature)))
		}
		if unexported {
			names = append(names, "unexported methods")
			lines = append(lines, decl+" interface, unexported methods")
		}
		// The summary line changes when a method is added: implementations outside the
		// package break.
		lines = append(lines, decl+" interface { "+strings.Join(names, ", ")+" }")
	default:
		lines = append(lines, decl+" "+w.typ(u))
	}
	// Methods, promoted ones included, with the receiver that has them: T when the
	// value's method set has the method, *T otherwise.
	recv := name
	if tp := named.TypeParams(); tp.Len() > 0 {
		args := make([]string, tp.Len())
		for i := range args {
			args[i] = "$" + strconv.Itoa(i)
		}
		recv += "[" + strings.Join(args, ", ") + "]"
	}
	seen := map[string]bool{}
	if _, isIface := named.Underlying().(*types.Interface); !isIface {
		for _, ptr := range []bool{false, true} {
			var t types.Type = named
			r := recv
			if ptr {
				t = types.NewPointer(named)
				r = "*" + recv
			}
			ms := types.NewMethodSet(t)
			for i := 0; i < ms.Len(); i++ {
				m := ms.At(i).Obj().(*types.Func)
				if !m.Exported() || seen[m.Name()] {
					continue
				}
				seen[m.Name()] = true
				sig := m.Type().(*types.Signature)
				w.rparams = sig.RecvTypeParams()
				lines = append(lines, "method ("+r+") "+m.Name()+w.signature(sig))
				w.rparams = nil
			}
		}
	}
	return lines
}

func (w *writer) typeParamList(tp *types.TypeParamList) string {
	if tp == nil || tp.Len() == 0 {
		return ""
	}
	parts := make([]string, tp.Len())
	for i := range parts {
		parts[i] = "$" + strconv.Itoa(i) + " " + w.typ(tp.At(i).Constraint())
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

func (w *writer) typ(t types.Type) string {
	var b strings.Builder
	w.write(&b, t)
	return b.String()
}

func (w *writer) qualified(obj types.Object) string {
	if obj.Pkg() == nil || obj.Pkg() == w.pkg {
		return obj.Name()
	}
	return obj.Pkg().Name() + "." + obj.Name()
}

func (w *writer) typeArgs(b *strings.Builder, args *types.TypeList) {
	if args == nil || args.Len() == 0 {
		return
	}
	b.WriteByte('[')
	for i := 0; i < args.Len(); i++ {
		if i > 0 {
			b.WriteString(", ")
		}
		w.write(b, args.At(i))
	}
	b.WriteByte(']')
}

func (w *writer) write(b *strings.Builder, t types.Type) {
	switch t := t.(type) {
	case *types.Basic:
		b.WriteString(t.Name())
	case *types.Pointer:
		b.WriteByte('*')
		w.write(b, t.Elem())
	case *types.Slice:
		b.WriteString("[]")
		w.write(b, t.Elem())
	case *types.Array:
		fmt.Fprintf(b, "[%d]", t.Len())
		w.write(b, t.Elem())
	case *types.Map:
		b.WriteString("map[")
		w.write(b, t.Key())
		b.WriteByte(']')
		w.write(b, t.Elem())
	case *types.Chan:
		switch t.Dir() {
		case types.SendRecv:
			b.WriteString("chan ")
			if c, ok := t.Elem().(*types.Chan); ok && c.Dir() == types.RecvOnly {
				b.WriteByte('(')
				w.write(b, c)
				b.WriteByte(')')
				return
			}
		case types.SendOnly:
			b.WriteString("chan<- ")
		case types.RecvOnly:
			b.WriteString("<-chan ")
		}
		w.write(b, t.Elem())
	case *types.Named:
		b.WriteString(w.qualified(t.Obj()))
		w.typeArgs(b, t.TypeArgs())
	case *types.Alias:
		b.WriteString(w.qualified(t.Obj()))
		w.typeArgs(b, t.TypeArgs())
	case *types.TypeParam:
		b.WriteString(w.typeParamName(t))
	case *types.Signature:
		b.WriteString("func")
		b.WriteString(w.signature(t))
	case *types.Struct:
		if t.NumFields() == 0 {
			b.WriteString("struct{}")
			return
		}
		b.WriteString("struct{ ")
		for i := 0; i < t.NumFields(); i++ {
			if i > 0 {
				b.WriteString("; ")
			}
			f := t.Field(i)
			if !f.Embedded() {
				b.WriteString(f.Name())
				b.WriteByte(' ')
			}
			w.write(b, f.Type())
			if tag := t.Tag(i); tag != "" {
				b.WriteByte(' ')
				b.WriteString(quoteTag(tag))
			}
		}
		b.WriteString(" }")
	case *types.Interface:
		var parts []string
		for i := 0; i < t.NumEmbeddeds(); i++ {
			parts = append(parts, w.typ(t.EmbeddedType(i)))
		}
		for i := 0; i < t.NumExplicitMethods(); i++ {
			m := t.ExplicitMethod(i)
			parts = append(parts, m.Name()+w.signature(m.Type().(*types.Signature)))
		}
		if len(parts) == 0 {
			b.WriteString("interface{}")
			return
		}
		b.WriteString("interface{ " + strings.Join(parts, "; ") + " }")
	case *types.Union:
		for i := 0; i < t.Len(); i++ {
			if i > 0 {
				b.WriteString(" | ")
			}
			term := t.Term(i)
			if term.Tilde() {
				b.WriteByte('~')
			}
			w.write(b, term.Type())
		}
	case *types.Tuple:
		w.tuple(b, t, false)
	default:
		b.WriteString(t.String())
	}
}

func (w *writer) typeParamName(tp *types.TypeParam) string {
	for _, list := range []*types.TypeParamList{w.tparams, w.rparams} {
		if list == nil {
			continue
		}
		for i := 0; i < list.Len(); i++ {
			if list.At(i) == tp {
				return "$" + strconv.Itoa(i)
			}
		}
	}
	return tp.Obj().Name()
}

func (w *writer) tuple(b *strings.Builder, t *types.Tuple, variadic bool) {
	b.WriteByte('(')
	for i := 0; i < t.Len(); i++ {
		if i > 0 {
			b.WriteString(", ")
		}
		typ := t.At(i).Type()
		if variadic && i == t.Len()-1 {
			b.WriteString("...")
			typ = typ.(*types.Slice).Elem()
		}
		w.write(b, typ)
	}
	b.WriteByte(')')
}

// signature writes "(params) results" without parameter names.
func (w *writer) signature(sig *types.Signature) string {
	var b strings.Builder
	w.tuple(&b, sig.Params(), sig.Variadic())
	switch res := sig.Results(); res.Len() {
	case 0:
	case 1:
		b.WriteByte(' ')
		w.write(&b, res.At(0).Type())
	default:
		b.WriteByte(' ')
		w.tuple(&b, res, false)
	}
	return b.String()
}
