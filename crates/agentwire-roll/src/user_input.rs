//! User-input forms (1.2+): the five control kinds, the form rules the schema cannot express,
//! and normalisation of a submitted result against the form that asked for it.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::constants::{
    MAX_USER_INPUT_CANCEL_REASON_CHARS, MAX_USER_INPUT_CONTROLS, MAX_USER_INPUT_DESCRIPTION_CHARS,
    MAX_USER_INPUT_ID_CHARS, MAX_USER_INPUT_LABEL_CHARS, MAX_USER_INPUT_OPTIONS,
    MAX_USER_INPUT_TEXT_CHARS, js_length,
};

/// One option of a choice control.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ChoiceOption {
    pub id: String,
    pub label: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// One form control. There is deliberately no secret, password, token or file kind.
///
/// Written by hand, with its control structs: a tagged union matched by field where the
/// generator makes one struct per variant carrying its tag, and `text` and `multiline` share
/// one struct; the form rules below work on these.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum Control {
    /// One line of text.
    Text(TextControl),
    /// Several lines of text.
    Multiline(TextControl),
    /// A number.
    Number(NumberControl),
    /// A yes/no switch.
    Boolean(BooleanControl),
    /// One or several options.
    Choice(ChoiceControl),
}

/// `text` and `multiline`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TextControl {
    pub id: String,
    pub label: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub required: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_length: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_length: Option<u32>,
}

/// `number`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NumberControl {
    pub id: String,
    pub label: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub required: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub integer: Option<bool>,
}

/// `boolean`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BooleanControl {
    pub id: String,
    pub label: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub required: bool,
}

/// `choice`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ChoiceControl {
    pub id: String,
    pub label: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub required: bool,
    pub multiple: bool,
    pub options: Vec<ChoiceOption>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_selections: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_selections: Option<u32>,
}

impl Control {
    /// The control id.
    pub fn id(&self) -> &str {
        match self {
            Control::Text(c) | Control::Multiline(c) => &c.id,
            Control::Number(c) => &c.id,
            Control::Boolean(c) => &c.id,
            Control::Choice(c) => &c.id,
        }
    }

    /// Whether a value must be submitted.
    pub fn is_required(&self) -> bool {
        match self {
            Control::Text(c) | Control::Multiline(c) => c.required,
            Control::Number(c) => c.required,
            Control::Boolean(c) => c.required,
            Control::Choice(c) => c.required || c.min_selections.unwrap_or(0) > 0,
        }
    }

    fn label(&self) -> &str {
        match self {
            Control::Text(c) | Control::Multiline(c) => &c.label,
            Control::Number(c) => &c.label,
            Control::Boolean(c) => &c.label,
            Control::Choice(c) => &c.label,
        }
    }

    fn description(&self) -> Option<&str> {
        match self {
            Control::Text(c) | Control::Multiline(c) => c.description.as_deref(),
            Control::Number(c) => c.description.as_deref(),
            Control::Boolean(c) => c.description.as_deref(),
            Control::Choice(c) => c.description.as_deref(),
        }
    }
}

impl TextControl {
    /// The effective bounds: minimum = max(minLength or 0, 1 if required), maximum = maxLength
    /// or 10,000.
    pub fn length_bounds(&self) -> (usize, usize) {
        let min = (self.min_length.unwrap_or(0) as usize).max(usize::from(self.required));
        let max = self
            .max_length
            .map_or(MAX_USER_INPUT_TEXT_CHARS, |m| m as usize);
        (min, max)
    }
}

impl ChoiceControl {
    /// The effective most selections: `maxSelections`, else the option count when multiple, else 1.
    pub fn effective_max_selections(&self) -> usize {
        match self.max_selections {
            Some(max) => max as usize,
            None if self.multiple => self.options.len(),
            None => 1,
        }
    }

    /// The effective fewest selections when a value is given.
    pub fn effective_min_selections(&self) -> usize {
        (self.min_selections.unwrap_or(0) as usize).max(usize::from(self.required))
    }
}

/// Why a form or a result was refused. Each variant names the offending control id.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UserInputError {
    /// The form has no controls or more than 16.
    #[error("a form has 1..{MAX_USER_INPUT_CONTROLS} controls, this one has {0}")]
    ControlCount(usize),
    /// Two controls (or two options of one control) share an id.
    #[error("duplicate id {0:?}")]
    DuplicateId(String),
    /// An id, label or description is empty, blank or too long.
    #[error("bad text field {field} of {id:?}")]
    BadText { id: String, field: &'static str },
    /// A control's own bounds contradict each other.
    #[error("control {0:?} has inconsistent bounds")]
    InconsistentBounds(String),
    /// A choice control has no options or more than 50.
    #[error("control {0:?} must have 1..{MAX_USER_INPUT_OPTIONS} options")]
    OptionCount(String),
    /// The result names a control the form does not have.
    #[error("the form has no control {0:?}")]
    UnknownControl(String),
    /// The result gives a control two values.
    #[error("control {0:?} has more than one value")]
    DuplicateValue(String),
    /// A required control has no value.
    #[error("control {0:?} is required")]
    MissingRequired(String),
    /// The value has the wrong type for the control.
    #[error("control {0:?} got a value of the wrong type")]
    WrongType(String),
    /// The value is outside the control's bounds (length, range, selections, integer).
    #[error("control {0:?} got a value outside its bounds")]
    OutOfBounds(String),
    /// A choice value names an option the control does not have, or repeats one.
    #[error("control {0:?} got an unknown or repeated option")]
    BadOption(String),
    /// More than 16 values, or a cancel reason outside 1..500 characters.
    #[error("malformed result: {0}")]
    Malformed(&'static str),
}

impl UserInputError {
    /// Stable error code.
    pub fn code(&self) -> &'static str {
        match self {
            UserInputError::ControlCount(_) => "roll.user-input.control-count",
            UserInputError::DuplicateId(_) => "roll.user-input.duplicate-id",
            UserInputError::BadText { .. } => "roll.user-input.bad-text",
            UserInputError::InconsistentBounds(_) => "roll.user-input.inconsistent-bounds",
            UserInputError::OptionCount(_) => "roll.user-input.option-count",
            UserInputError::UnknownControl(_) => "roll.user-input.unknown-control",
            UserInputError::DuplicateValue(_) => "roll.user-input.duplicate-value",
            UserInputError::MissingRequired(_) => "roll.user-input.missing-required",
            UserInputError::WrongType(_) => "roll.user-input.wrong-type",
            UserInputError::OutOfBounds(_) => "roll.user-input.out-of-bounds",
            UserInputError::BadOption(_) => "roll.user-input.bad-option",
            UserInputError::Malformed(_) => "roll.user-input.malformed",
        }
    }
}

fn check_text(id: &str, field: &'static str, text: &str, max: usize) -> Result<(), UserInputError> {
    let length = js_length(text);
    if length == 0 || length > max || text.trim().is_empty() {
        return Err(UserInputError::BadText {
            id: id.to_owned(),
            field,
        });
    }
    Ok(())
}

fn check_description(id: &str, text: Option<&str>) -> Result<(), UserInputError> {
    match text {
        Some(text) if text.is_empty() || js_length(text) > MAX_USER_INPUT_DESCRIPTION_CHARS => {
            Err(UserInputError::BadText {
                id: id.to_owned(),
                field: "description",
            })
        }
        _ => Ok(()),
    }
}

/// Checks the rules of a form the schema cannot express: unique control and option ids,
/// non-blank labels, and bounds that can be met.
pub fn validate_form(controls: &[Control]) -> Result<(), UserInputError> {
    if controls.is_empty() || controls.len() > MAX_USER_INPUT_CONTROLS {
        return Err(UserInputError::ControlCount(controls.len()));
    }
    let mut ids = BTreeSet::new();
    for control in controls {
        let id = control.id();
        check_text(id, "id", id, MAX_USER_INPUT_ID_CHARS)?;
        check_text(id, "label", control.label(), MAX_USER_INPUT_LABEL_CHARS)?;
        check_description(id, control.description())?;
        if !ids.insert(id) {
            return Err(UserInputError::DuplicateId(id.to_owned()));
        }
        let inconsistent = || UserInputError::InconsistentBounds(id.to_owned());
        match control {
            Control::Text(c) | Control::Multiline(c) => {
                let bound_ok =
                    |b: Option<u32>| b.is_none_or(|b| b as usize <= MAX_USER_INPUT_TEXT_CHARS);
                let (min, max) = c.length_bounds();
                if !bound_ok(c.min_length) || !bound_ok(c.max_length) || min > max {
                    return Err(inconsistent());
                }
            }
            Control::Number(c) => {
                let finite = |b: Option<f64>| b.is_none_or(f64::is_finite);
                if !finite(c.min) || !finite(c.max) {
                    return Err(inconsistent());
                }
                if let (Some(min), Some(max)) = (c.min, c.max)
                    && (min > max || (c.integer == Some(true) && min.ceil() > max.floor()))
                {
                    return Err(inconsistent());
                }
            }
            Control::Boolean(_) => {}
            Control::Choice(c) => {
                if c.options.is_empty() || c.options.len() > MAX_USER_INPUT_OPTIONS {
                    return Err(UserInputError::OptionCount(id.to_owned()));
                }
                let mut option_ids = BTreeSet::new();
                for option in &c.options {
                    check_text(&option.id, "id", &option.id, MAX_USER_INPUT_ID_CHARS)?;
                    check_text(
                        &option.id,
                        "label",
                        &option.label,
                        MAX_USER_INPUT_LABEL_CHARS,
                    )?;
                    check_description(&option.id, option.description.as_deref())?;
                    if !option_ids.insert(option.id.as_str()) {
                        return Err(UserInputError::DuplicateId(option.id.clone()));
                    }
                }
                let max = c.effective_max_selections();
                let min = c.min_selections.unwrap_or(0) as usize;
                if c.max_selections == Some(0)
                    || min > max
                    || max > c.options.len()
                    || (!c.multiple && (max > 1 || min > 1))
                {
                    return Err(inconsistent());
                }
            }
        }
    }
    Ok(())
}

/// One submitted value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SubmittedValue {
    pub id: String,
    pub value: Value,
}

/// What the host answered to `userInput.request`.
///
/// Written by hand for the same reason as [`Control`] (tagged by `status`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "camelCase", deny_unknown_fields)]
pub enum UserInputResult {
    /// The user submitted the form.
    Submitted { values: Vec<SubmittedValue> },
    /// The user closed the form: a normal result, not an error.
    Cancelled {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
}

fn check_value_shape(value: &SubmittedValue) -> Result<(), UserInputError> {
    let ok = match &value.value {
        Value::String(text) => js_length(text) <= MAX_USER_INPUT_TEXT_CHARS,
        Value::Number(_) | Value::Bool(_) => true,
        Value::Array(items) => {
            items.len() <= MAX_USER_INPUT_OPTIONS
                && items.iter().all(|item| {
                    item.as_str()
                        .is_some_and(|s| js_length(s) <= MAX_USER_INPUT_ID_CHARS)
                })
        }
        Value::Null | Value::Object(_) => false,
    };
    if ok {
        Ok(())
    } else {
        Err(UserInputError::WrongType(value.id.clone()))
    }
}

/// Checks a result on its own (without the form): at most 16 values, each of a submittable type
/// with a unique id; a cancel reason of 1..500 characters.
pub fn normalize_user_input_result(
    result: UserInputResult,
) -> Result<UserInputResult, UserInputError> {
    match &result {
        UserInputResult::Cancelled {
            reason: Some(reason),
        } if reason.is_empty() || js_length(reason) > MAX_USER_INPUT_CANCEL_REASON_CHARS => {
            return Err(UserInputError::Malformed(
                "a cancel reason has 1..500 characters",
            ));
        }
        UserInputResult::Cancelled { .. } => {}
        UserInputResult::Submitted { values } => {
            if values.len() > MAX_USER_INPUT_CONTROLS {
                return Err(UserInputError::Malformed("at most 16 values"));
            }
            let mut ids = BTreeSet::new();
            for value in values {
                check_text(&value.id, "id", &value.id, MAX_USER_INPUT_ID_CHARS)?;
                check_value_shape(value)?;
                if !ids.insert(value.id.as_str()) {
                    return Err(UserInputError::DuplicateValue(value.id.clone()));
                }
            }
        }
    }
    Ok(result)
}

fn check_against(control: &Control, value: &Value) -> Result<(), UserInputError> {
    let id = control.id().to_owned();
    match control {
        Control::Text(c) | Control::Multiline(c) => {
            let text = value
                .as_str()
                .ok_or_else(|| UserInputError::WrongType(id.clone()))?;
            let (min, max) = c.length_bounds();
            let length = js_length(text);
            if length < min || length > max {
                return Err(UserInputError::OutOfBounds(id));
            }
        }
        Control::Number(c) => {
            let number = value
                .as_f64()
                .filter(|n| n.is_finite())
                .ok_or_else(|| UserInputError::WrongType(id.clone()))?;
            let integer_ok = c.integer != Some(true) || number.fract() == 0.0;
            let min_ok = c.min.is_none_or(|min| number >= min);
            let max_ok = c.max.is_none_or(|max| number <= max);
            if !(integer_ok && min_ok && max_ok) {
                return Err(UserInputError::OutOfBounds(id));
            }
        }
        Control::Boolean(_) => {
            if !value.is_boolean() {
                return Err(UserInputError::WrongType(id));
            }
        }
        Control::Choice(c) if !c.multiple => {
            let chosen = value
                .as_str()
                .ok_or_else(|| UserInputError::WrongType(id.clone()))?;
            if !c.options.iter().any(|o| o.id == chosen) {
                return Err(UserInputError::BadOption(id));
            }
        }
        Control::Choice(c) => {
            let items = value
                .as_array()
                .ok_or_else(|| UserInputError::WrongType(id.clone()))?;
            let mut seen = BTreeSet::new();
            for item in items {
                let chosen = item
                    .as_str()
                    .ok_or_else(|| UserInputError::WrongType(id.clone()))?;
                if !c.options.iter().any(|o| o.id == chosen) || !seen.insert(chosen) {
                    return Err(UserInputError::BadOption(id));
                }
            }
            let count = items.len();
            if count < c.effective_min_selections() || count > c.effective_max_selections() {
                return Err(UserInputError::OutOfBounds(id));
            }
        }
    }
    Ok(())
}

/// Checks a result against the form that asked for it and orders the values by control order.
/// `cancelled` passes unchanged. Any failure must cancel the interaction safely.
pub fn normalize_user_input_result_for_form(
    controls: &[Control],
    result: UserInputResult,
) -> Result<UserInputResult, UserInputError> {
    let result = normalize_user_input_result(result)?;
    let UserInputResult::Submitted { values } = result else {
        return Ok(result);
    };
    for value in &values {
        if !controls.iter().any(|c| c.id() == value.id) {
            return Err(UserInputError::UnknownControl(value.id.clone()));
        }
    }
    let mut ordered = Vec::with_capacity(values.len());
    for control in controls {
        match values.iter().find(|v| v.id == control.id()) {
            Some(value) => {
                check_against(control, &value.value)?;
                ordered.push(value.clone());
            }
            None if control.is_required() => {
                return Err(UserInputError::MissingRequired(control.id().to_owned()));
            }
            None => {}
        }
    }
    Ok(UserInputResult::Submitted { values: ordered })
}
