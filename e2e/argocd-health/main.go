// Command argocd-health runs an Argo CD resource health script (Lua) on Kubernetes objects, as
// Argo CD's application controller does, and prints the health Argo CD would show for each.
//
//	argocd-health <script.lua> <object.json>...
//
// One JSON line per object: {"file": ..., "status": ..., "message": ...}. What it reproduces of
// Argo CD (github.com/argoproj/argo-cd util/lua/lua.go, github.com/argoproj/gitops-engine
// pkg/health/health.go): an object being deleted is Progressing "Pending deletion" without running
// the script; the script runs in a gopher-lua state with only the package, base and table
// libraries opened (a resource.customizations.health script without useOpenLibs; Argo CD adds a
// reduced os library, left out here: the Stack's script uses no os function), a 1-second
// deadline, and the object as the global `obj`, its JSON integers as numbers (as Kubernetes'
// unstructured objects hold them); it must return a table whose status is one of Argo CD's health
// codes (otherwise Unknown, "Lua returned an invalid health status"); a script error is Unknown
// with the error's message.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	lua "github.com/yuin/gopher-lua"
)

type health struct {
	File    string `json:"file"`
	Status  string `json:"status"`
	Message string `json:"message,omitempty"`
}

var codes = map[string]bool{
	"Unknown": true, "Progressing": true, "Suspended": true, "Healthy": true, "Degraded": true, "Missing": true,
}

// toLua converts a decoded JSON value; json.Number becomes an integer or a float, as the
// unstructured objects Argo CD reads from the API server have them (int64, float64).
func toLua(l *lua.LState, v any) lua.LValue {
	switch x := v.(type) {
	case bool:
		return lua.LBool(x)
	case string:
		return lua.LString(x)
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return lua.LNumber(i)
		}
		f, _ := x.Float64()
		return lua.LNumber(f)
	case []any:
		t := l.CreateTable(len(x), 0)
		for _, item := range x {
			t.Append(toLua(l, item))
		}
		return t
	case map[string]any:
		t := l.CreateTable(0, len(x))
		for k, item := range x {
			t.RawSetH(lua.LString(k), toLua(l, item))
		}
		return t
	}
	return lua.LNil
}

func run(script string, obj map[string]any) (status, message string, err error) {
	l := lua.NewState(lua.Options{SkipOpenLibs: true})
	defer l.Close()
	for _, lib := range []struct {
		name string
		open lua.LGFunction
	}{{lua.LoadLibName, lua.OpenPackage}, {lua.BaseLibName, lua.OpenBase}, {lua.TabLibName, lua.OpenTable}} {
		if err := l.CallByParam(lua.P{Fn: l.NewFunction(lib.open), Protect: true}, lua.LString(lib.name)); err != nil {
			return "", "", err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	l.SetContext(ctx)
	l.SetGlobal("obj", toLua(l, obj))
	if err := l.DoString(script); err != nil {
		return "", "", err
	}
	ret, ok := l.Get(-1).(*lua.LTable)
	if !ok {
		return "", "", fmt.Errorf("expect table output from Lua script, not %s", l.Get(-1).Type())
	}
	field := func(name string) (string, error) {
		switch v := ret.RawGetString(name).(type) {
		case lua.LString:
			return string(v), nil
		case *lua.LNilType:
			return "", nil
		default:
			return "", fmt.Errorf("%s is a %s, not a string", name, v.Type())
		}
	}
	if status, err = field("status"); err != nil {
		return "", "", err
	}
	if message, err = field("message"); err != nil {
		return "", "", err
	}
	if !codes[status] {
		return "Unknown", "Lua returned an invalid health status", nil
	}
	return status, message, nil
}

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: argocd-health <script.lua> <object.json>...")
		os.Exit(2)
	}
	script, err := os.ReadFile(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	out := json.NewEncoder(os.Stdout)
	for _, file := range os.Args[2:] {
		data, err := os.ReadFile(file)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		d := json.NewDecoder(bytes.NewReader(data))
		d.UseNumber()
		var obj map[string]any
		if err := d.Decode(&obj); err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", file, err)
			os.Exit(2)
		}
		h := health{File: file}
		if meta, _ := obj["metadata"].(map[string]any); meta["deletionTimestamp"] != nil {
			h.Status, h.Message = "Progressing", "Pending deletion"
		} else if h.Status, h.Message, err = run(string(script), obj); err != nil {
			h.Status, h.Message = "Unknown", err.Error()
		}
		if err := out.Encode(h); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
	}
}
