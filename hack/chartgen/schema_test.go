/*
Copyright 2026 The lockwarden Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package main

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestInferType(t *testing.T) {
	for _, tc := range []struct {
		def, want string
	}{
		{"true", "boolean"},
		{"false", "boolean"},
		{"2", "integer"},
		{"-1", "integer"},
		{"0", "integer"},
		{"1310.72", "number"},
		{"15s", "string"},
		{"50m", "string"},
		{`""`, "string"},
		{`"1"`, "string"},
		{`"true"`, "string"},
		{"ghcr.io/lockwarden/lockwarden", "string"},
		{"{}", "object"},
		{"{team: platform}", "object"},
		{"[]", "array"},
		{`["ALL"]`, "array"},
		{"2 # a trailing comment", "integer"},
	} {
		got, err := inferType(tc.def)
		if err != nil || got != tc.want {
			t.Errorf("inferType(%q) = %q, %v; want %q", tc.def, got, err, tc.want)
		}
	}
	for _, def := range []string{"null", "~"} {
		if got, err := inferType(def); err == nil {
			t.Errorf("inferType(%q) = %q; want an error", def, got)
		}
	}
}

func TestParseAnnotations(t *testing.T) {
	lines := func(first int, texts ...string) []annotationLine {
		var out []annotationLine
		for i, s := range texts {
			out = append(out, annotationLine{first + i, s})
		}
		return out
	}
	for _, tc := range []struct {
		name  string
		lines []annotationLine
		want  []string // each patch as compact JSON
	}{
		{"one object", lines(3, ` {"pattern": "^--", "maxLength": 63}`), []string{`{"pattern":"^--","maxLength":63}`}},
		{"keys keep their order", lines(3, ` {"maximum": 10, "minimum": 0}`), []string{`{"maximum":10,"minimum":0}`}},
		{"one object over lines", lines(3, ` {"items": {"type": "object",`, `   "required": ["name"]}}`), []string{`{"items":{"type":"object","required":["name"]}}`}},
		{"an object a line", lines(3, ` {"type": "number"}`, ` {"minimum": 0}`), []string{`{"type":"number"}`, `{"minimum":0}`}},
		{"null and booleans", lines(3, ` {"additionalProperties": true, "default": null}`), []string{`{"additionalProperties":true,"default":null}`}},
		{"no escaping of <>&", lines(3, ` {"pattern": "^<a&b>$"}`), []string{`{"pattern":"^<a&b>$"}`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			patches, err := parseAnnotations("image.tag", tc.lines)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, p := range patches {
				got = append(got, compactJSON(p))
			}
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestParseAnnotationsErrors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		lines []annotationLine
		want  string
	}{
		{"bad JSON", []annotationLine{{12, ` {"pattern": "^--"`}, {13, ` "maxLength": 63}`}}, `line 13: @schema of image.tag: invalid JSON: invalid character '"' after object key:value pair`},
		{"bad JSON on the first line", []annotationLine{{12, ` {pattern: "^--"}`}, {13, ` {"maxLength": 63}`}}, `line 12: @schema of image.tag: invalid JSON: invalid character 'p'`},
		{"unclosed object", []annotationLine{{12, ` {"pattern": "^--",`}, {13, ` "maxLength": 63`}}, "line 13: @schema of image.tag: invalid JSON: unexpected EOF"},
		{"stray brace", []annotationLine{{12, ` {"maxLength": 63}}`}}, "line 12: @schema of image.tag: invalid JSON: invalid character '}'"},
		{"duplicate key", []annotationLine{{12, ` {"maxLength": 63, "maxLength": 64}`}}, `line 12: @schema of image.tag: invalid JSON: key "maxLength" twice`},
		{"not an object", []annotationLine{{12, ` {"maxLength": 63}`}, {13, ` ["a"]`}}, `line 13: @schema of image.tag: want a JSON object, got ["a"]`},
		{"misspelt keyword", []annotationLine{{12, ` {"patern": "^--"}`}}, `line 12: @schema of image.tag: "patern" is not a JSON Schema keyword`},
		{"description", []annotationLine{{12, ` {"description": "Tag."}`}}, `line 12: @schema of image.tag: "description" is not a JSON Schema keyword an annotation may set (the description comes from the comment)`},
		{"nothing after @schema", []annotationLine{{12, ""}}, "line 12: @schema of image.tag: no JSON object after @schema"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseAnnotations("image.tag", tc.lines)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestMerge(t *testing.T) {
	// The examples of RFC 7386, appendix A, and the patches values.yaml uses.
	for _, tc := range []struct{ target, patch, want string }{
		{`{"a":"b"}`, `{"a":"c"}`, `{"a":"c"}`},
		{`{"a":"b"}`, `{"b":"c"}`, `{"a":"b","b":"c"}`},
		{`{"a":"b"}`, `{"a":null}`, `{}`},
		{`{"a":"b","b":"c"}`, `{"a":null}`, `{"b":"c"}`},
		{`{"a":["b"]}`, `{"a":"c"}`, `{"a":"c"}`},
		{`{"a":"c"}`, `{"a":["b"]}`, `{"a":["b"]}`},
		{`{"a":{"b":"c"}}`, `{"a":{"b":"d","c":null}}`, `{"a":{"b":"d"}}`},
		{`{"a":[{"b":"c"}]}`, `{"a":[1]}`, `{"a":[1]}`},
		{`{"e":null}`, `{"a":1}`, `{"e":null,"a":1}`},
		{`{}`, `{"a":{"bb":{"ccc":null}}}`, `{"a":{"bb":{}}}`},
		{`{"type":"integer","description":"d"}`, `{"type":"number","minimum":0}`, `{"type":"number","description":"d","minimum":0}`},
		{`{"type":"object","additionalProperties":false}`, `{"additionalProperties":{"type":"string"}}`, `{"type":"object","additionalProperties":{"type":"string"}}`},
		{`{"properties":{"drop":{"type":"array"}}}`, `{"properties":{"add":{"type":"array"}}}`, `{"properties":{"drop":{"type":"array"},"add":{"type":"array"}}}`},
	} {
		target, patch := mustObject(t, tc.target), mustObject(t, tc.patch)
		merge(target, patch)
		if got := compactJSON(target); got != tc.want {
			t.Errorf("merge(%s, %s) = %s, want %s", tc.target, tc.patch, got, tc.want)
		}
		if got := compactJSON(patch); got != tc.patch {
			t.Errorf("merge changed the patch %s to %s", tc.patch, got)
		}
	}
}

func mustObject(t *testing.T, s string) *object {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	v, err := decodeValue(dec)
	if err != nil {
		t.Fatalf("%s: %v", s, err)
	}
	return v.(*object)
}

func TestValuesSchema(t *testing.T) {
	const values = `# Header, not a description.
# @schema {"required": ["image"]}

# The image.
# @schema {"required": ["repository"]}
image:
  # Repository.
  # @schema {"minLength": 1}
  repository: ghcr.io/x/y
  # Tag <with> & "quotes".
  tag: ""
# Replicas.
replicaCount: 2
# Queries per second.
# @schema {"type": "number",
# @schema   "minimum": 0}
qps: 0
# Pod annotations.
# @schema {"additionalProperties": {"type": "string"}}
podAnnotations: {}
# Security context; any field of a PodSecurityContext.
# @schema {"additionalProperties": true}
securityContext:
  # Run as non-root.
  runAsNonRoot: true
# Extra args.
# @schema {"items": {"type": "string"}}
extraArgs: []
# No default.
# @schema {"type": ["string", "null"]}
optional: null
`
	root, err := parseValues(values)
	if err != nil {
		t.Fatal(err)
	}
	got, err := valuesSchema(root)
	if err != nil {
		t.Fatal(err)
	}
	want := `{
  "$schema": "http://json-schema.org/draft-07/schema#",
  "$comment": "Generated by hack/chartgen from the comments in values.yaml: edit those and run make manifests.",
  "title": "lockwarden chart values",
  "type": "object",
  "additionalProperties": false,
  "properties": {
    "global": {
      "type": "object",
      "description": "Helm's global values, passed to every chart; lockwarden reads none."
    },
    "image": {
      "type": "object",
      "description": "The image.",
      "additionalProperties": false,
      "properties": {
        "repository": {
          "type": "string",
          "description": "Repository.",
          "minLength": 1
        },
        "tag": {
          "type": "string",
          "description": "Tag <with> & \"quotes\"."
        }
      },
      "required": [
        "repository"
      ]
    },
    "replicaCount": {
      "type": "integer",
      "description": "Replicas."
    },
    "qps": {
      "type": "number",
      "description": "Queries per second.",
      "minimum": 0
    },
    "podAnnotations": {
      "type": "object",
      "description": "Pod annotations.",
      "additionalProperties": {
        "type": "string"
      }
    },
    "securityContext": {
      "type": "object",
      "description": "Security context; any field of a PodSecurityContext.",
      "additionalProperties": true,
      "properties": {
        "runAsNonRoot": {
          "type": "boolean",
          "description": "Run as non-root."
        }
      }
    },
    "extraArgs": {
      "type": "array",
      "description": "Extra args.",
      "items": {
        "type": "string"
      }
    },
    "optional": {
      "type": [
        "string",
        "null"
      ],
      "description": "No default."
    }
  },
  "required": [
    "image"
  ]
}
`
	if string(got) != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}

	table, err := valuesTable(root)
	if err != nil {
		t.Fatal(err)
	}
	wantTable := "| Key | Type | Default | Description |\n|---|---|---|---|\n" +
		"| `image.repository` | string | `ghcr.io/x/y` | Repository. |\n" +
		"| `image.tag` | string | `\"\"` | Tag <with> & \"quotes\". |\n" +
		"| `replicaCount` | int | `2` | Replicas. |\n" +
		"| `qps` | number | `0` | Queries per second. |\n" +
		"| `podAnnotations` | object | `{}` | Pod annotations. |\n" +
		"| `securityContext.runAsNonRoot` | bool | `true` | Run as non-root. |\n" +
		"| `extraArgs` | list | `[]` | Extra args. |\n" +
		"| `optional` | string or null | `null` | No default. |\n"
	if table != wantTable {
		t.Errorf("table:\n%s\nwant:\n%s", table, wantTable)
	}
}

func TestParseValuesErrors(t *testing.T) {
	for _, tc := range []struct{ name, values, want string }{
		{"no comment", "# Replicas.\nreplicaCount: 2\nimage: x\n", "line 3: image has no comment above it"},
		{"only an annotation", "# @schema {\"minimum\": 0}\nreplicaCount: 2\n", "line 2: replicaCount has no comment above it"},
		{"block list", "# Args.\nargs:\n  - a\n", "line 3: expected `key: value` or `key:`"},
		{"bad annotation JSON", "# Header.\n\n# The image.\nimage:\n  # Tag.\n  # @schema {\"pattern\": \"^a$\",}\n  tag: a\n", "line 6: @schema of image.tag: invalid JSON: invalid character '}'"},
		{"bad header annotation", "# Header.\n# @schema {\"if\": }\n\n# Replicas.\nreplicaCount: 2\n", "line 2: @schema of the header: invalid JSON"},
		{"annotation not above a key", "# Replicas.\nreplicaCount: 2\n\n# @schema {\"minimum\": 0}\n\n# Port.\nport: 1\n", "line 4: @schema annotation not right above a key"},
		{"annotation at the end", "# Port.\nport: 1\n# @schema {\"minimum\": 0}", "line 3: @schema annotation not right above a key"},
		{"null default without a type", "# Optional.\noptional: null\n", "line 2: optional: no type can be inferred from the default \"null\""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root, err := parseValues(tc.values)
			if err == nil {
				_, err = valuesSchema(root)
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestTableType(t *testing.T) {
	for _, tc := range []struct{ schema, want string }{
		{`{"type":"integer"}`, "int"},
		{`{"type":"boolean"}`, "bool"},
		{`{"type":"array"}`, "list"},
		{`{"type":"object"}`, "object"},
		{`{"type":"string"}`, "string"},
		{`{"type":"number"}`, "number"},
		{`{"type":["string","integer"]}`, "string or int"},
		{`{"minimum":1}`, "any"},
	} {
		if got := tableType(mustObject(t, tc.schema)); got != tc.want {
			t.Errorf("tableType(%s) = %q, want %q", tc.schema, got, tc.want)
		}
	}
}
