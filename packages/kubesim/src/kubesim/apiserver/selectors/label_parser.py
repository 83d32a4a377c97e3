"""The label selector string parser, a port of ``labels.Lexer`` and ``labels.Parser``.

Source: k8s.io/apimachinery/pkg/labels/selector.go. Error texts are upstream's;
kube-apiserver returns them with 400 BadRequest for a bad ``labelSelector``.
"""

from enum import Enum

from kubesim.apiserver.gofmt import go_quote
from kubesim.apiserver.selectors.label_validation import field_invalid, label_key_errors
from kubesim.apiserver.selectors.labels import (
    EXISTENCE_OPERATORS,
    SET_OPERATORS,
    LabelSelector,
    Operator,
    Requirement,
    SelectorError,
    new_requirement,
    sorted_by_key,
)


class _Token(Enum):
    END = "end of string"
    CLOSED_PAR = ")"
    COMMA = ","
    DOES_NOT_EXIST = "!"
    DOUBLE_EQUALS = "=="
    EQUALS = "="
    GREATER_THAN = ">"
    IDENTIFIER = "identifier"
    IN = "in"
    LESS_THAN = "<"
    NOT_EQUALS = "!="
    NOT_IN = "notin"
    OPEN_PAR = "("


_LITERAL_TOKENS = {
    token.value: token for token in _Token if token not in (_Token.END, _Token.IDENTIFIER)
}
_SPECIAL_SYMBOLS = frozenset("=!(),><")
_WHITESPACE = frozenset(" \t\r\n")
_BINARY_OPERATORS = ", ".join(
    op.value
    for op in (
        Operator.IN,
        Operator.NOT_IN,
        Operator.EQUALS,
        Operator.DOUBLE_EQUALS,
        Operator.NOT_EQUALS,
        Operator.GREATER_THAN,
        Operator.LESS_THAN,
    )
)
_TOKEN_OPERATORS = {
    _Token.IN: Operator.IN,
    _Token.NOT_IN: Operator.NOT_IN,
    _Token.EQUALS: Operator.EQUALS,
    _Token.DOUBLE_EQUALS: Operator.DOUBLE_EQUALS,
    _Token.NOT_EQUALS: Operator.NOT_EQUALS,
    _Token.GREATER_THAN: Operator.GREATER_THAN,
    _Token.LESS_THAN: Operator.LESS_THAN,
}
# Go's lexer reads bytes and treats a 0 byte like the end of the input.
_EOF = "\x00"


class _Lexer:
    def __init__(self, text: str) -> None:
        self._text = text
        self._pos = 0

    def _read(self) -> str:
        if self._pos < len(self._text):
            char = self._text[self._pos]
            self._pos += 1
            return char
        return _EOF

    def _unread(self) -> None:
        self._pos -= 1

    def _scan_identifier_or_keyword(self) -> tuple[_Token, str]:
        chars = []
        while True:
            char = self._read()
            if char == _EOF:
                break
            if char in _SPECIAL_SYMBOLS or char in _WHITESPACE:
                self._unread()
                break
            chars.append(char)
        literal = "".join(chars)
        return _LITERAL_TOKENS.get(literal, _Token.IDENTIFIER), literal

    def _scan_special_symbol(self) -> tuple[_Token, str]:
        # Every special symbol is a token on its own, so the longest-match loop
        # below always finds one (upstream's ErrorToken branch is unreachable).
        best: tuple[_Token, str] | None = None
        buffer = ""
        while True:
            char = self._read()
            if char == _EOF:
                break
            if char not in _SPECIAL_SYMBOLS:
                self._unread()
                break
            buffer += char
            token = _LITERAL_TOKENS.get(buffer)
            if token is not None:
                best = (token, buffer)
            elif best is not None:
                self._unread()
                break
        assert best is not None
        return best

    def lex(self) -> tuple[_Token, str]:
        char = self._read()
        while char in _WHITESPACE:
            char = self._read()
        if char == _EOF:
            return _Token.END, ""
        self._unread()
        if char in _SPECIAL_SYMBOLS:
            return self._scan_special_symbol()
        return self._scan_identifier_or_keyword()


class _Parser:
    def __init__(self, text: str) -> None:
        lexer = _Lexer(text)
        self._items: list[tuple[_Token, str]] = []
        while True:
            item = lexer.lex()
            self._items.append(item)
            if item[0] is _Token.END:
                break
        self._position = 0

    def _lookahead(self, values_context: bool = True) -> tuple[_Token, str]:
        token, literal = self._items[self._position]
        if values_context and token in (_Token.IN, _Token.NOT_IN):
            token = _Token.IDENTIFIER
        return token, literal

    def _consume(self, values_context: bool = True) -> tuple[_Token, str]:
        item = self._lookahead(values_context)
        self._position += 1
        return item

    def parse(self) -> list[Requirement]:
        requirements: list[Requirement] = []
        while True:
            token, literal = self._lookahead()
            if token in (_Token.IDENTIFIER, _Token.DOES_NOT_EXIST):
                try:
                    requirements.append(self._parse_requirement())
                except SelectorError as error:
                    raise SelectorError(f"unable to parse requirement: {error}") from None
                token, literal = self._consume()
                if token is _Token.END:
                    return requirements
                if token is _Token.COMMA:
                    next_token, next_literal = self._lookahead()
                    if next_token not in (_Token.IDENTIFIER, _Token.DOES_NOT_EXIST):
                        raise SelectorError(
                            f"found '{next_literal}', expected: identifier after ','"
                        )
                else:
                    raise SelectorError(f"found '{literal}', expected: ',' or 'end of string'")
            elif token is _Token.END:
                return requirements
            else:
                raise SelectorError(
                    f"found '{literal}', expected: !, identifier, or 'end of string'"
                )

    def _parse_requirement(self) -> Requirement:
        key, operator = self._parse_key_and_infer_operator()
        if operator in EXISTENCE_OPERATORS:
            return new_requirement(key, operator, [])
        operator = self._parse_operator()
        set_based = operator in SET_OPERATORS
        values = self._parse_values() if set_based else self._parse_exact_value()
        return new_requirement(key, operator, sorted(values))

    def _parse_key_and_infer_operator(self) -> tuple[str, Operator | None]:
        operator: Operator | None = None
        token, literal = self._consume()
        if token is _Token.DOES_NOT_EXIST:
            operator = Operator.DOES_NOT_EXIST
            token, literal = self._consume()
        if token is not _Token.IDENTIFIER:
            raise SelectorError(f"found '{literal}', expected: identifier")
        key_errors = label_key_errors(literal)
        if key_errors:
            raise SelectorError(field_invalid("<nil>", go_quote(literal), "; ".join(key_errors)))
        if self._lookahead()[0] in (_Token.END, _Token.COMMA) and operator is None:
            operator = Operator.EXISTS
        return literal, operator

    def _parse_operator(self) -> Operator:
        token, literal = self._consume(values_context=False)
        operator = _TOKEN_OPERATORS.get(token)
        if operator is None:
            raise SelectorError(f"found '{literal}', expected: {_BINARY_OPERATORS}")
        return operator

    def _parse_values(self) -> set[str]:
        token, literal = self._consume()
        if token is not _Token.OPEN_PAR:
            raise SelectorError(f"found '{literal}' expected: '('")
        token, literal = self._lookahead()
        if token in (_Token.IDENTIFIER, _Token.COMMA):
            values = self._parse_identifiers_list()
            if self._consume()[0] is not _Token.CLOSED_PAR:
                raise SelectorError(f"found '{literal}', expected: ')'")
            return values
        if token is _Token.CLOSED_PAR:
            self._consume()
            return {""}
        raise SelectorError(f"found '{literal}', expected: ',', ')' or identifier")

    def _parse_identifiers_list(self) -> set[str]:
        values: set[str] = set()
        while True:
            token, literal = self._consume()
            if token is _Token.IDENTIFIER:
                values.add(literal)
                next_token, next_literal = self._lookahead()
                if next_token is _Token.COMMA:
                    continue
                if next_token is _Token.CLOSED_PAR:
                    return values
                raise SelectorError(f"found '{next_literal}', expected: ',' or ')'")
            if token is _Token.COMMA:
                # "(,", ",)" and ",," each stand for an empty value.
                if not values:
                    values.add("")
                next_token = self._lookahead()[0]
                if next_token is _Token.CLOSED_PAR:
                    values.add("")
                    return values
                if next_token is _Token.COMMA:
                    values.add("")
            else:
                raise SelectorError(f"found '{literal}', expected: ',', or identifier")

    def _parse_exact_value(self) -> set[str]:
        if self._lookahead()[0] in (_Token.END, _Token.COMMA):
            return {""}
        token, literal = self._consume()
        if token is _Token.IDENTIFIER:
            return {literal}
        raise SelectorError(f"found '{literal}', expected: identifier")


def parse_label_selector(text: str) -> LabelSelector:
    """labels.Parse: the ``labelSelector`` query parameter; ``""`` matches everything.

    Grammar: comma-separated requirements, each ``[!]key``, ``key=v``,
    ``key==v``, ``key!=v``, ``key in (v1,v2)``, ``key notin (v)``, ``key>n`` or
    ``key<n``; blanks, tabs, CR and LF separate tokens.
    """
    return LabelSelector(sorted_by_key(_Parser(text).parse()))
