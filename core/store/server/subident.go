package server

import (
	"strconv"
	"strings"

	"github.com/ployz/ployz/core/store/crdt"
)

// Row identity in a subscription, as Corrosion has it: a result row is
// identified by the primary keys of every table the query reads, selected
// or not, so an update of a joined row is an update, not a delete and an
// insert. identityQuery rewrites a plain SELECT to carry those keys as
// leading hidden columns. Queries it does not understand (compound
// selects, DISTINCT, aggregates, subqueries or functions in FROM) keep the
// old rule: the whole row is its identity.

// sqlToken is one lexical token of a query; depth is the parenthesis depth
// it sits at.
type sqlToken struct {
	text  string // as written
	word  string // upper-cased keyword or unquoted identifier; "" otherwise
	ident string // identifier value (quotes removed) for words and quoted names
	pos   int
	depth int
}

// lexSQL splits q into tokens, dropping whitespace and comments; ok is
// false for input it cannot split (an unterminated quote).
func lexSQL(q string) ([]sqlToken, bool) {
	var out []sqlToken
	depth := 0
	for i := 0; i < len(q); {
		c := q[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f':
			i++
		case c == '-' && strings.HasPrefix(q[i:], "--"):
			j := strings.IndexByte(q[i:], '\n')
			if j < 0 {
				return out, true
			}
			i += j + 1
		case c == '/' && strings.HasPrefix(q[i:], "/*"):
			j := strings.Index(q[i+2:], "*/")
			if j < 0 {
				return out, true
			}
			i += j + 4
		case c == '\'' || c == '"' || c == '`' || c == '[':
			closer := c
			if c == '[' {
				closer = ']'
			}
			j := i + 1
			for {
				if j >= len(q) {
					return nil, false
				}
				if q[j] == closer {
					if closer != ']' && j+1 < len(q) && q[j+1] == closer {
						j += 2
						continue
					}
					break
				}
				j++
			}
			t := sqlToken{text: q[i : j+1], pos: i, depth: depth}
			if c != '\'' {
				t.ident = strings.ReplaceAll(q[i+1:j], string(closer)+string(closer), string(closer))
			}
			out = append(out, t)
			i = j + 1
		case isIdentByte(c):
			j := i
			for j < len(q) && isIdentByte(q[j]) {
				j++
			}
			out = append(out, sqlToken{text: q[i:j], word: strings.ToUpper(q[i:j]), ident: q[i:j], pos: i, depth: depth})
			i = j
		default:
			if c == ')' {
				depth--
			}
			out = append(out, sqlToken{text: q[i : i+1], pos: i, depth: depth})
			if c == '(' {
				depth++
			}
			i++
		}
	}
	return out, true
}

func isIdentByte(c byte) bool {
	return c == '_' || c == '$' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80
}

// clauseEnd are keywords that end a FROM clause at the top level.
var clauseEnd = map[string]bool{"WHERE": true, "GROUP": true, "HAVING": true, "WINDOW": true, "ORDER": true, "LIMIT": true}

// joinWords may stand between two tables of a FROM clause.
var joinWords = map[string]bool{"JOIN": true, "LEFT": true, "RIGHT": true, "FULL": true, "INNER": true, "OUTER": true, "CROSS": true, "NATURAL": true}

// aggregates make a result row a group, which no table key identifies.
var aggregates = map[string]bool{"COUNT": true, "SUM": true, "TOTAL": true, "AVG": true, "MIN": true, "MAX": true,
	"GROUP_CONCAT": true, "STRING_AGG": true, "JSON_GROUP_ARRAY": true, "JSON_GROUP_OBJECT": true, "JSONB_GROUP_ARRAY": true, "JSONB_GROUP_OBJECT": true}

// identityQuery returns q with the primary key columns of every table it
// reads prepended as hidden result columns, and how many there are; ok is
// false when q is not a SELECT this rewrite understands.
func identityQuery(q string, schema *crdt.Schema) (string, int, bool) {
	toks, ok := lexSQL(q)
	if !ok || len(toks) < 4 || toks[0].word != "SELECT" {
		return "", 0, false
	}
	from := -1
	for i, t := range toks {
		if t.depth != 0 {
			if t.word != "" && aggregates[t.word] && i+1 < len(toks) && toks[i+1].text == "(" && from < 0 {
				return "", 0, false
			}
			continue
		}
		switch {
		case t.word == "UNION" || t.word == "INTERSECT" || t.word == "EXCEPT" || t.word == "GROUP" || t.word == "VALUES" || t.text == ";":
			return "", 0, false
		case i == 1 && (t.word == "DISTINCT" || t.word == "ALL"):
			if t.word == "DISTINCT" {
				return "", 0, false
			}
		case t.word != "" && aggregates[t.word] && i+1 < len(toks) && toks[i+1].text == "(" && from < 0:
			return "", 0, false
		case t.word == "FROM" && from < 0:
			from = i
		}
	}
	if from < 0 || orderByPosition(toks) {
		return "", 0, false
	}
	var hidden []string
	i := from + 1
	for i < len(toks) && !(toks[i].depth == 0 && clauseEnd[toks[i].word]) {
		// One table: name [AS alias | alias], then ON expr / USING (...).
		t := toks[i]
		if t.ident == "" || t.word == "SELECT" {
			return "", 0, false // a subquery or something else in FROM
		}
		name := t.ident
		i++
		if i+1 < len(toks) && toks[i].text == "." && strings.EqualFold(name, "main") {
			name = toks[i+1].ident
			i += 2
		}
		if i < len(toks) && toks[i].text == "(" {
			return "", 0, false // a table-valued function
		}
		tbl := schema.Tables[name]
		if tbl == nil {
			return "", 0, false
		}
		ref := name
		if i < len(toks) && toks[i].word == "AS" {
			i++
		}
		if i < len(toks) && toks[i].depth == 0 && toks[i].ident != "" && !joinWords[toks[i].word] && !clauseEnd[toks[i].word] &&
			toks[i].word != "ON" && toks[i].word != "USING" && toks[i].word != "INDEXED" && toks[i].word != "NOT" {
			ref = toks[i].ident
			i++
		}
		for _, pk := range tbl.PK {
			hidden = append(hidden, quoteIdent(ref)+"."+quoteIdent(pk)+" AS "+quoteIdent("__ployz_id_"+strconv.Itoa(len(hidden))))
		}
		// Skip to the next table: past ON/USING/INDEXED BY, to a comma or a join keyword.
		for i < len(toks) && !(toks[i].depth == 0 && (clauseEnd[toks[i].word] || toks[i].text == "," || joinWords[toks[i].word])) {
			i++
		}
		for i < len(toks) && toks[i].depth == 0 && (toks[i].text == "," || joinWords[toks[i].word]) {
			i++
		}
	}
	if len(hidden) == 0 {
		return "", 0, false
	}
	at := toks[1].pos
	if toks[1].word == "ALL" {
		at = toks[2].pos
	}
	return q[:at] + strings.Join(hidden, ", ") + ", " + q[at:], len(hidden), true
}

// orderByPosition reports a top-level ORDER BY naming a result column by
// its position, which the hidden columns would shift.
func orderByPosition(toks []sqlToken) bool {
	in := false
	for i, t := range toks {
		if t.depth != 0 {
			continue
		}
		switch {
		case t.word == "ORDER":
			in = true
		case t.word == "LIMIT":
			in = false
		case in && t.word != "" && t.word[0] >= '0' && t.word[0] <= '9' && (toks[i-1].word == "BY" || toks[i-1].text == ","):
			return true
		}
	}
	return false
}

func quoteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }
