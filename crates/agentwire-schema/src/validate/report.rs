//! The report pass: the engine's error tree turned into issues, with this crate's codes and
//! messages.

use super::*;

/// Turns the engine's error tree into issues.
pub(super) struct Reporter<'v> {
    pub(super) validator: &'v Validator,
    pub(super) root: &'v Value,
    pub(super) out: Vec<Issue>,
}

impl Reporter<'_> {
    fn push(
        &mut self,
        code: IssueCode,
        keyword: &'static str,
        err: &ValidationError<'_>,
        message: String,
    ) {
        self.out.push(Issue {
            code,
            instance_pointer: err.instance_path().as_str().to_owned(),
            schema_pointer: err.schema_path().as_str().to_owned(),
            keyword,
            message,
        });
    }

    /// A count keyword's limit as the schema writes it (`1e40`, not the engine's clamped
    /// integer).
    fn limit_text(&self, err: &ValidationError<'_>, limit: u64) -> String {
        match pointer::resolve(&self.validator.document, err.schema_path().as_str()) {
            // serde_json prints `1e40` as `1e+40`; a schema author writes the former.
            Some(Value::Number(n)) => n.to_string().replacen("e+", "e", 1),
            _ => limit.to_string(),
        }
    }

    /// [`Reporter::limit_text`] with its unit.
    fn limit(&self, err: &ValidationError<'_>, limit: u64, one: &str, many: &str) -> String {
        let text = self.limit_text(err, limit);
        if text == "1" {
            format!("1 {one}")
        } else {
            format!("{text} {many}")
        }
    }

    pub(super) fn report(&mut self, err: &ValidationError<'_>, depth: usize) {
        let instance = err.instance();
        let value: &Value = instance.as_ref();
        let shown = message::preview(value);
        match err.kind() {
            ValidationErrorKind::OneOfNotValid { context } => {
                self.union(err, context, IssueCode::OneOfNone, "oneOf", depth);
            }
            ValidationErrorKind::AnyOf { context } => {
                self.union(err, context, IssueCode::AnyOfNone, "anyOf", depth);
            }
            ValidationErrorKind::OneOfMultipleValid { context } => {
                let union_at = err.schema_path().as_str();
                let valid: Vec<String> = context
                    .iter()
                    .enumerate()
                    .filter(|(_, issues)| issues.is_empty())
                    .map(|(i, _)| self.validator.branch_label(union_at, i))
                    .collect();
                let message = format!(
                    "matches {} alternatives ({}) where exactly one must match",
                    valid.len(),
                    valid.join(", ")
                );
                self.push(IssueCode::OneOfMany, "oneOf", err, message);
            }
            ValidationErrorKind::AdditionalProperties { unexpected } => {
                for name in unexpected {
                    self.property_issue(
                        err,
                        IssueCode::AdditionalProperty,
                        "additionalProperties",
                        name,
                    );
                }
            }
            ValidationErrorKind::UnevaluatedProperties { unexpected } => {
                for name in unexpected {
                    self.property_issue(
                        err,
                        IssueCode::UnevaluatedProperty,
                        "unevaluatedProperties",
                        name,
                    );
                }
            }
            ValidationErrorKind::PropertyNames { error } => {
                let name = error
                    .instance()
                    .as_ref()
                    .as_str()
                    .unwrap_or_default()
                    .to_owned();
                let mut inner = Reporter {
                    validator: self.validator,
                    root: self.root,
                    out: Vec::new(),
                };
                inner.report(error, depth + 1);
                let why = inner
                    .out
                    .first()
                    .map(|i| i.message.clone())
                    .unwrap_or_default();
                let message = format!(
                    "property name {} is not allowed: {why}",
                    message::preview(&json!(name))
                );
                let code = match inner.out.first() {
                    Some(i) if i.code == IssueCode::PatternBudget => IssueCode::PatternBudget,
                    _ => IssueCode::PropertyNames,
                };
                self.push(code, "propertyNames", err, message);
            }
            ValidationErrorKind::Type { kind } => {
                let expected = match kind {
                    TypeKind::Single(t) => t.to_string(),
                    TypeKind::Multiple(set) => set
                        .iter()
                        .map(|t| t.to_string())
                        .collect::<Vec<_>>()
                        .join(" or "),
                };
                let found = message::type_name(value);
                self.push(
                    IssueCode::Type,
                    "type",
                    err,
                    format!("{shown} is {} {found}, expected {expected}", article(found)),
                );
            }
            ValidationErrorKind::Required { property } => {
                let name = property
                    .as_str()
                    .map_or_else(|| property.to_string(), |s| format!("{s:?}"));
                self.push(
                    IssueCode::Required,
                    "required",
                    err,
                    format!("missing required property {name}"),
                );
            }
            ValidationErrorKind::Constant { expected_value } => {
                let message = format!(
                    "{shown} is not the required value {}",
                    message::preview(expected_value)
                );
                self.push(IssueCode::Const, "const", err, message);
            }
            ValidationErrorKind::Enum { options } => {
                let allowed = match options.as_ref() {
                    Value::Array(values) => message::list_values(values.iter()),
                    other => message::preview(other),
                };
                self.push(
                    IssueCode::Enum,
                    "enum",
                    err,
                    format!("{shown} is not one of {allowed}"),
                );
            }
            ValidationErrorKind::Format { format } => {
                self.push(
                    IssueCode::Format,
                    "format",
                    err,
                    format!("{shown} is not a valid {format}"),
                );
            }
            ValidationErrorKind::Pattern { pattern } => {
                self.push(
                    IssueCode::Pattern,
                    "pattern",
                    err,
                    format!("{shown} does not match the pattern {pattern}"),
                );
            }
            ValidationErrorKind::BacktrackLimitExceeded { error } => {
                let message = format!("the pattern could not be evaluated on {shown}: {error}");
                self.push(IssueCode::PatternBudget, "pattern", err, message);
            }
            ValidationErrorKind::RegexEngineFailure { message } => {
                let message = format!("the pattern could not be evaluated on {shown}: {message}");
                self.push(IssueCode::Pattern, "pattern", err, message);
            }
            ValidationErrorKind::Custom { keyword, message } if keyword == "pattern" => {
                let code = if message.starts_with(pattern::BUDGET_MESSAGE_START) {
                    IssueCode::PatternBudget
                } else {
                    IssueCode::Pattern
                };
                self.push(code, "pattern", err, message.clone());
            }
            ValidationErrorKind::Custom { keyword, message } if keyword == "multipleOf" => {
                self.push(IssueCode::MultipleOf, "multipleOf", err, message.clone());
            }
            ValidationErrorKind::Custom { message, .. } => {
                self.push(IssueCode::Other, "", err, message.clone());
            }
            ValidationErrorKind::MinLength { limit } => {
                let message = format!(
                    "{shown} is shorter than {}",
                    self.limit(err, *limit, "character", "characters")
                );
                self.push(IssueCode::MinLength, "minLength", err, message);
            }
            ValidationErrorKind::MaxLength { limit } => {
                let message = format!(
                    "{shown} is longer than {}",
                    self.limit(err, *limit, "character", "characters")
                );
                self.push(IssueCode::MaxLength, "maxLength", err, message);
            }
            ValidationErrorKind::Minimum { limit } => {
                self.push(
                    IssueCode::Minimum,
                    "minimum",
                    err,
                    format!("{shown} is less than the minimum {limit}"),
                );
            }
            ValidationErrorKind::Maximum { limit } => {
                self.push(
                    IssueCode::Maximum,
                    "maximum",
                    err,
                    format!("{shown} is greater than the maximum {limit}"),
                );
            }
            ValidationErrorKind::ExclusiveMinimum { limit } => {
                let message = format!("{shown} is not greater than the exclusive minimum {limit}");
                self.push(
                    IssueCode::ExclusiveMinimum,
                    "exclusiveMinimum",
                    err,
                    message,
                );
            }
            ValidationErrorKind::ExclusiveMaximum { limit } => {
                let message = format!("{shown} is not less than the exclusive maximum {limit}");
                self.push(
                    IssueCode::ExclusiveMaximum,
                    "exclusiveMaximum",
                    err,
                    message,
                );
            }
            ValidationErrorKind::MultipleOf { multiple_of } => {
                let message = format!("{shown} is not a multiple of {}", json!(multiple_of));
                self.push(IssueCode::MultipleOf, "multipleOf", err, message);
            }
            ValidationErrorKind::MinItems { limit } => {
                let message = format!(
                    "{} items, fewer than the minimum of {}",
                    count_of(value),
                    self.limit_text(err, *limit)
                );
                self.push(IssueCode::MinItems, "minItems", err, message);
            }
            ValidationErrorKind::MaxItems { limit } => {
                let message = format!(
                    "{} items, more than the maximum of {}",
                    count_of(value),
                    self.limit_text(err, *limit)
                );
                self.push(IssueCode::MaxItems, "maxItems", err, message);
            }
            ValidationErrorKind::MinProperties { limit } => {
                let message = format!(
                    "{} properties, fewer than the minimum of {}",
                    count_of(value),
                    self.limit_text(err, *limit)
                );
                self.push(IssueCode::MinProperties, "minProperties", err, message);
            }
            ValidationErrorKind::MaxProperties { limit } => {
                let message = format!(
                    "{} properties, more than the maximum of {}",
                    count_of(value),
                    self.limit_text(err, *limit)
                );
                self.push(IssueCode::MaxProperties, "maxProperties", err, message);
            }
            ValidationErrorKind::UniqueItems => {
                let message = match duplicate_pair(value) {
                    Some((a, b)) => format!("items {a} and {b} are equal; items must be unique"),
                    None => "items must be unique".to_owned(),
                };
                self.push(IssueCode::UniqueItems, "uniqueItems", err, message);
            }
            ValidationErrorKind::Contains => {
                let message = "no item matches the `contains` schema".to_owned();
                self.push(IssueCode::Contains, "contains", err, message);
            }
            ValidationErrorKind::AdditionalItems { limit } => {
                let message = format!(
                    "more than {} are not allowed",
                    message::plural(*limit as u64, "item", "items")
                );
                self.push(IssueCode::AdditionalItems, "additionalItems", err, message);
            }
            ValidationErrorKind::UnevaluatedItems { unexpected } => {
                let message = format!("unexpected items: {}", unexpected.join(", "));
                self.push(
                    IssueCode::UnevaluatedItems,
                    "unevaluatedItems",
                    err,
                    message,
                );
            }
            ValidationErrorKind::Not { .. } => {
                self.push(
                    IssueCode::Not,
                    "not",
                    err,
                    format!("{shown} matches a schema it must not match"),
                );
            }
            ValidationErrorKind::FalseSchema => {
                self.push(
                    IssueCode::FalseSchema,
                    "false",
                    err,
                    format!("{shown} is not allowed here"),
                );
            }
            ValidationErrorKind::ContentEncoding { content_encoding } => {
                let message = format!("{shown} is not valid {content_encoding}");
                self.push(IssueCode::Content, "contentEncoding", err, message);
            }
            ValidationErrorKind::FromUtf8 { .. } => {
                let message = format!("{shown} does not decode to UTF-8 text");
                self.push(IssueCode::Content, "contentEncoding", err, message);
            }
            ValidationErrorKind::ContentMediaType { content_media_type } => {
                let message = format!("{shown} is not valid {content_media_type}");
                self.push(IssueCode::Content, "contentMediaType", err, message);
            }
            ValidationErrorKind::Referencing(e) => {
                self.push(
                    IssueCode::Other,
                    "$ref",
                    err,
                    format!("reference cannot be resolved: {e}"),
                );
            }
        }
    }

    fn property_issue(
        &mut self,
        err: &ValidationError<'_>,
        code: IssueCode,
        keyword: &'static str,
        name: &str,
    ) {
        self.out.push(Issue {
            code,
            instance_pointer: pointer::push(err.instance_path().as_str(), name),
            schema_pointer: err.schema_path().as_str().to_owned(),
            keyword,
            message: format!(
                "property {} is not allowed here",
                message::preview(&json!(name))
            ),
        });
    }

    /// A failed `oneOf` / `anyOf`: the selected branch's issues when a tag picks one, else a
    /// summary of the branches.
    fn union(
        &mut self,
        err: &ValidationError<'_>,
        context: &[Vec<ValidationError<'static>>],
        code: IssueCode,
        keyword: &'static str,
        depth: usize,
    ) {
        let union_at = err.schema_path().as_str();
        let instance_at = err.instance_path().as_str();
        let validator = self.validator;
        if depth < MAX_REPORT_DEPTH
            && let (Some(dispatch), Some(Value::Object(object))) = (
                validator.dispatch.get(union_at),
                pointer::resolve(self.root, instance_at),
            )
        {
            let tag_keyword = if dispatch.explicit {
                "discriminator"
            } else {
                keyword
            };
            let tag_schema = if dispatch.explicit {
                format!(
                    "{}/discriminator",
                    union_at.rsplit_once('/').map_or("", |(p, _)| p)
                )
            } else {
                union_at.to_owned()
            };
            match object.get(&dispatch.property) {
                None if dispatch.tag_required => {
                    self.out.push(Issue {
                        code: IssueCode::Required,
                        instance_pointer: instance_at.to_owned(),
                        schema_pointer: tag_schema,
                        keyword: tag_keyword,
                        message: format!(
                            "missing required property {:?}, which selects the kind of object ({})",
                            dispatch.property,
                            message::list_values(dispatch.tag_values())
                        ),
                    });
                    return;
                }
                None => {}
                Some(tag) => match dispatch.branch_for(tag) {
                    Some(branch) if context.get(branch).is_some_and(|e| !e.is_empty()) => {
                        for inner in &context[branch] {
                            self.report(inner, depth + 1);
                        }
                        return;
                    }
                    Some(_) => {}
                    None => {
                        self.out.push(Issue {
                            code: IssueCode::Discriminator,
                            instance_pointer: pointer::push(instance_at, &dispatch.property),
                            schema_pointer: tag_schema,
                            keyword: tag_keyword,
                            message: format!(
                                "{} is not a known {:?}; expected {}",
                                message::preview(tag),
                                dispatch.property,
                                message::list_values(dispatch.tag_values())
                            ),
                        });
                        return;
                    }
                },
            }
        }
        let mut message = format!(
            "{} matches none of the {} alternatives",
            message::preview(err.instance().as_ref()),
            context.len()
        );
        if context.len() <= MAX_SUMMARISED_BRANCHES && depth < MAX_REPORT_DEPTH {
            let mut parts = Vec::new();
            for (i, branch) in context.iter().enumerate() {
                let mut inner = Reporter {
                    validator,
                    root: self.root,
                    out: Vec::new(),
                };
                for e in branch {
                    inner.report(e, depth + 1);
                }
                let Some(first) = inner.out.first() else {
                    continue;
                };
                let at = if first.instance_pointer == instance_at {
                    String::new()
                } else {
                    format!("at {} ", first.instance_pointer)
                };
                let more = match inner.out.len() {
                    1 => String::new(),
                    n => format!(" (+{} more)", n - 1),
                };
                parts.push(format!(
                    "{}: {at}{}{more}",
                    validator.branch_label(union_at, i),
                    first.message
                ));
            }
            if !parts.is_empty() {
                message.push_str(": ");
                message.push_str(&parts.join("; "));
            }
        }
        self.push(code, keyword, err, message);
    }
}

/// The issues without repeats, in first-seen order: a schema that reaches one keyword by many
/// paths (an `allOf` of two references to the same definition) reports it once.
pub(super) fn dedup(issues: Vec<Issue>) -> Vec<Issue> {
    let mut seen = std::collections::HashSet::with_capacity(issues.len());
    issues
        .into_iter()
        .filter(|i| {
            seen.insert((
                i.code.code(),
                i.instance_pointer.clone(),
                i.schema_pointer.clone(),
                i.message.clone(),
            ))
        })
        .collect()
}

fn article(type_name: &str) -> &'static str {
    if type_name.starts_with(['a', 'e', 'i', 'o', 'u']) {
        "an"
    } else {
        "a"
    }
}

fn count_of(value: &Value) -> String {
    match value {
        Value::Array(items) => format!("the array has {}", items.len()),
        Value::Object(map) => format!("the object has {}", map.len()),
        _ => "the value has".to_owned(),
    }
}

fn duplicate_pair(value: &Value) -> Option<(usize, usize)> {
    let items = value.as_array()?;
    if items.len() > MAX_DUPLICATE_SEARCH_ITEMS {
        return None;
    }
    for (i, a) in items.iter().enumerate() {
        for (j, b) in items.iter().enumerate().skip(i + 1) {
            if json_equal(a, b) {
                return Some((i, j));
            }
        }
    }
    None
}

/// JSON Schema equality: numbers by value, objects regardless of key order.
fn json_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| json_equal(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_equal(v, w)))
        }
        _ => a == b,
    }
}
