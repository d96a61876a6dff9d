//! Pythonic tool calls: a Python list of calls with keyword arguments,
//! `[get_weather(city="Paris", days=3), ...]`, arguments being Python literals.

use serde_json::{Map, Number, Value};

use super::ToolCall;

/// The calls of the list `text` starts with (after whitespace), and the byte offset after it.
pub(crate) fn leading_calls(text: &str) -> Option<(Vec<ToolCall>, usize)> {
    let mut p = Parser { s: text, at: 0 };
    p.ws();
    p.eat('[')?;
    let mut calls = Vec::new();
    loop {
        p.ws();
        if p.eat(']').is_some() {
            break;
        }
        calls.push(p.call()?);
        p.ws();
        if p.eat(',').is_none() {
            p.ws();
            p.eat(']')?;
            break;
        }
    }
    (!calls.is_empty()).then_some((calls, p.at))
}

struct Parser<'a> {
    s: &'a str,
    at: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<char> {
        self.s[self.at..].chars().next()
    }

    fn ws(&mut self) {
        while self.peek().is_some_and(char::is_whitespace) {
            self.at += 1;
        }
    }

    fn eat(&mut self, c: char) -> Option<()> {
        (self.peek() == Some(c)).then(|| self.at += c.len_utf8())
    }

    fn ident(&mut self) -> Option<String> {
        let start = self.at;
        while let Some(c) = self
            .peek()
            .filter(|c| c.is_alphanumeric() || *c == '_' || *c == '.')
        {
            self.at += c.len_utf8();
        }
        let name = &self.s[start..self.at];
        name.chars()
            .next()
            .filter(|c| !c.is_ascii_digit())
            .map(|_| name.to_string())
    }

    fn call(&mut self) -> Option<ToolCall> {
        let name = self.ident()?;
        self.ws();
        self.eat('(')?;
        let mut args = Map::new();
        loop {
            self.ws();
            if self.eat(')').is_some() {
                break;
            }
            let key = self.ident()?;
            self.ws();
            self.eat('=')?;
            self.ws();
            args.insert(key, self.literal()?);
            self.ws();
            if self.eat(',').is_none() {
                self.ws();
                self.eat(')')?;
                break;
            }
        }
        Some(ToolCall {
            name,
            arguments: Value::Object(args).to_string(),
        })
    }

    fn literal(&mut self) -> Option<Value> {
        match self.peek()? {
            '"' | '\'' => self.string().map(Value::String),
            '[' | '(' => {
                let close = if self.peek() == Some('[') { ']' } else { ')' };
                self.at += 1;
                let mut items = Vec::new();
                loop {
                    self.ws();
                    if self.eat(close).is_some() {
                        return Some(Value::Array(items));
                    }
                    items.push(self.literal()?);
                    self.ws();
                    if self.eat(',').is_none() {
                        self.ws();
                        self.eat(close)?;
                        return Some(Value::Array(items));
                    }
                }
            }
            '{' => {
                self.at += 1;
                let mut map = Map::new();
                loop {
                    self.ws();
                    if self.eat('}').is_some() {
                        return Some(Value::Object(map));
                    }
                    let key = match self.literal()? {
                        Value::String(s) => s,
                        other => other.to_string(),
                    };
                    self.ws();
                    self.eat(':')?;
                    self.ws();
                    map.insert(key, self.literal()?);
                    self.ws();
                    if self.eat(',').is_none() {
                        self.ws();
                        self.eat('}')?;
                        return Some(Value::Object(map));
                    }
                }
            }
            _ => self.scalar(),
        }
    }

    /// `True`, `False`, `None` or a number.
    fn scalar(&mut self) -> Option<Value> {
        let start = self.at;
        while self
            .peek()
            .is_some_and(|c| c.is_alphanumeric() || matches!(c, '.' | '-' | '+' | '_'))
        {
            self.at += 1;
        }
        let word = &self.s[start..self.at];
        match word {
            "True" => Some(Value::Bool(true)),
            "False" => Some(Value::Bool(false)),
            "None" => Some(Value::Null),
            _ => word.parse::<i64>().ok().map(Value::from).or_else(|| {
                word.parse::<f64>()
                    .ok()
                    .filter(|f| f.is_finite())
                    .and_then(Number::from_f64)
                    .map(Value::Number)
            }),
        }
    }

    /// A quoted string with Python's common escapes.
    fn string(&mut self) -> Option<String> {
        let quote = self.peek()?;
        self.at += 1;
        let mut out = String::new();
        let mut chars = self.s[self.at..].char_indices();
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' => {
                    let (_, e) = chars.next()?;
                    out.push(match e {
                        'n' => '\n',
                        't' => '\t',
                        'r' => '\r',
                        '0' => '\0',
                        other => other,
                    });
                }
                c if c == quote => {
                    self.at += i + 1;
                    return Some(out);
                }
                c => out.push(c),
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_calls_with_literal_arguments() {
        let text = "[get_weather(city=\"Paris\", days=3), get_time(zone='CET', exact=True, o={'a': None, \"b\": [1.5, -2]})] after";
        let (calls, end) = leading_calls(text).unwrap();
        assert_eq!(
            calls[0],
            ToolCall {
                name: "get_weather".into(),
                arguments: r#"{"city":"Paris","days":3}"#.into()
            }
        );
        assert_eq!(
            calls[1].arguments,
            r#"{"zone":"CET","exact":true,"o":{"a":null,"b":[1.5,-2]}}"#
        );
        assert_eq!(&text[end..], " after");
    }

    #[test]
    fn rejects_unfinished_or_non_call_lists() {
        assert!(leading_calls("[get_weather(city=\"Paris\"").is_none());
        assert!(leading_calls("[1, 2]").is_none());
        assert!(leading_calls("[]").is_none());
        assert!(leading_calls("[f(x)]").is_none());
    }
}
