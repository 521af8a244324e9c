
/** One reason a value does not match the schema. */
data class ValidationError(
    /** JSON Pointer of the offending value in the instance ("" for the value itself); a missing property is reported at its object. */
    val instancePath: String,
    /** The schema keyword that failed (`type`, `required`, `oneOf`, ...). */
    val keyword: String,
    /** A sentence saying what is wrong. */
    val message: String
)

/** The verdict of a validator: `ok` when `errors` is empty. */
data class ValidationResult(val ok: Boolean, val errors: List<ValidationError>)

/** Thrown by the `assert*` functions and `fromWire`; carries every error. */
class ProtocolValidationError(val errors: List<ValidationError>) : IllegalArgumentException(
    errors.joinToString("; ") { (if (it.instancePath == "") "/" else it.instancePath) + ": " + it.message }
)

/** Deepest nesting of schema nodes and values one validation follows; deeper input fails with keyword `maxDepth`. */
const val MAX_VALIDATION_DEPTH: Int = 256

/**
 * Parses JSON text into the decoded-JSON form the validators and `fromWire` take:
 * `Map<String, Any?>` (insertion order kept), `List<Any?>`, `String`, `Long` (integers that fit),
 * `Double`, `Boolean`, `null`. Throws IllegalArgumentException for malformed text.
 */
fun parseJson(text: String): Any? {
    val parser = JsonParser(text)
    val value = parser.value(0)
    parser.skipSpace()
    require(parser.at == text.length) { "JSON: unexpected text at " + parser.at }
    return value
}

/** Writes a decoded-JSON value (as `parseJson` returns it, or as `toWire` builds it) as compact JSON text. */
fun writeJson(value: Any?): String {
    val out = StringBuilder()
    writeJsonTo(out, value)
    return out.toString()
}

private fun writeJsonTo(out: StringBuilder, value: Any?) {
    when (value) {
        null -> out.append("null")
        is Boolean -> out.append(value.toString())
        is Long, is Int, is Short, is Byte -> out.append(value.toString())
        is Number -> {
            val d = value.toDouble()
            require(!d.isNaN() && !d.isInfinite()) { "JSON: no text for " + d }
            if (d == Math.rint(d) && Math.abs(d) < 1e15) out.append(d.toLong().toString()) else out.append(d.toString())
        }
        is String -> writeJsonString(out, value)
        is Map<*, *> -> {
            out.append('{')
            var first = true
            for ((k, v) in value) {
                if (!first) out.append(',')
                first = false
                writeJsonString(out, k as String)
                out.append(':')
                writeJsonTo(out, v)
            }
            out.append('}')
        }
        is List<*> -> {
            out.append('[')
            for ((i, v) in value.withIndex()) {
                if (i > 0) out.append(',')
                writeJsonTo(out, v)
            }
            out.append(']')
        }
        else -> throw IllegalArgumentException("JSON: not a JSON value: " + value.javaClass.name)
    }
}

private fun writeJsonString(out: StringBuilder, text: String) {
    out.append('"')
    for (c in text) {
        when {
            c == '"' -> out.append("\\\"")
            c == '\\' -> out.append("\\\\")
            c == '\n' -> out.append("\\n")
            c == '\r' -> out.append("\\r")
            c == '\t' -> out.append("\\t")
            c < ' ' -> out.append(String.format("\\u%04x", c.toInt()))
            else -> out.append(c)
        }
    }
    out.append('"')
}

private class JsonParser(val text: String) {
    var at = 0

    fun skipSpace() {
        while (at < text.length && (text[at] == ' ' || text[at] == '\t' || text[at] == '\n' || text[at] == '\r')) at++
    }

    fun value(depth: Int): Any? {
        require(depth <= 512) { "JSON: nesting deeper than 512" }
        skipSpace()
        require(at < text.length) { "JSON: unexpected end" }
        return when (text[at]) {
            '{' -> {
                at++
                val map = LinkedHashMap<String, Any?>()
                skipSpace()
                if (at < text.length && text[at] == '}') {
                    at++
                    return map
                }
                while (true) {
                    skipSpace()
                    require(at < text.length && text[at] == '"') { "JSON: expected a key at " + at }
                    val key = string()
                    skipSpace()
                    expect(':')
                    map[key] = value(depth + 1)
                    skipSpace()
                    if (at < text.length && text[at] == ',') {
                        at++
                        continue
                    }
                    expect('}')
                    return map
                }
                @Suppress("UNREACHABLE_CODE")
                map
            }
            '[' -> {
                at++
                val list = ArrayList<Any?>()
                skipSpace()
                if (at < text.length && text[at] == ']') {
                    at++
                    return list
                }
                while (true) {
                    list.add(value(depth + 1))
                    skipSpace()
                    if (at < text.length && text[at] == ',') {
                        at++
                        continue
                    }
                    expect(']')
                    return list
                }
                @Suppress("UNREACHABLE_CODE")
                list
            }
            '"' -> string()
            't' -> word("true", true)
            'f' -> word("false", false)
            'n' -> word("null", null)
            else -> number()
        }
    }

    fun expect(c: Char) {
        require(at < text.length && text[at] == c) { "JSON: expected " + c + " at " + at }
        at++
    }

    fun word(w: String, value: Any?): Any? {
        require(text.startsWith(w, at)) { "JSON: unexpected text at " + at }
        at += w.length
        return value
    }

    fun number(): Any? {
        val start = at
        if (at < text.length && text[at] == '-') at++
        while (at < text.length && text[at] in '0'..'9') at++
        var integral = true
        if (at < text.length && text[at] == '.') {
            integral = false
            at++
            while (at < text.length && text[at] in '0'..'9') at++
        }
        if (at < text.length && (text[at] == 'e' || text[at] == 'E')) {
            integral = false
            at++
            if (at < text.length && (text[at] == '+' || text[at] == '-')) at++
            while (at < text.length && text[at] in '0'..'9') at++
        }
        val literal = text.substring(start, at)
        require(Regex("-?(0|[1-9][0-9]*)(\\.[0-9]+)?([eE][+-]?[0-9]+)?").matches(literal)) { "JSON: bad number at " + start }
        if (integral) {
            val asLong = literal.toLongOrNull()
            if (asLong != null) return asLong
        }
        return literal.toDouble()
    }

    fun string(): String {
        expect('"')
        val out = StringBuilder()
        while (true) {
            require(at < text.length) { "JSON: unterminated string" }
            val c = text[at++]
            when {
                c == '"' -> return out.toString()
                c == '\\' -> {
                    require(at < text.length) { "JSON: unterminated string" }
                    when (val e = text[at++]) {
                        '"' -> out.append('"')
                        '\\' -> out.append('\\')
                        '/' -> out.append('/')
                        'b' -> out.append('\b')
                        'f' -> out.append('\u000c')
                        'n' -> out.append('\n')
                        'r' -> out.append('\r')
                        't' -> out.append('\t')
                        'u' -> {
                            require(at + 4 <= text.length) { "JSON: bad escape" }
                            out.append(text.substring(at, at + 4).toInt(16).toChar())
                            at += 4
                        }
                        else -> throw IllegalArgumentException("JSON: bad escape \\" + e)
                    }
                }
                c < ' ' -> throw IllegalArgumentException("JSON: control character in a string")
                else -> out.append(c)
            }
        }
    }
}

private val patternCache = HashMap<String, java.util.regex.Pattern>()

private fun schemaAt(pointer: String): Any? {
    var node: Any? = SCHEMA
    if (pointer == "") return node
    for (raw in pointer.substring(1).split("/")) {
        val token = raw.replace("~1", "/").replace("~0", "~")
        val here = node
        node = when (here) {
            is Map<*, *> -> if (here.containsKey(token)) here[token] else return MISSING
            is List<*> -> {
                val index = token.toIntOrNull()
                if (index == null || index < 0 || index >= here.size) return MISSING
                here[index]
            }
            else -> return MISSING
        }
    }
    return node
}

/** Stands for "no schema node here" (a JSON null is a node). */
private val MISSING = Any()

private fun escapeToken(token: String): String = token.replace("~", "~0").replace("/", "~1")

private fun isInteger(value: Any?): Boolean = when (value) {
    is Long, is Int, is Short, is Byte -> true
    is Double -> !value.isInfinite() && !value.isNaN() && value == Math.floor(value)
    is Float -> !value.isInfinite() && !value.isNaN() && value.toDouble() == Math.floor(value.toDouble())
    else -> false
}

private fun isNumber(value: Any?): Boolean = value is Number && !value.toDouble().isNaN() && !value.toDouble().isInfinite()

private fun hasType(value: Any?, expected: String): Boolean = when (expected) {
    "null" -> value == null
    "boolean" -> value is Boolean
    "integer" -> isInteger(value)
    "number" -> isNumber(value)
    "string" -> value is String
    "array" -> value is List<*>
    "object" -> value is Map<*, *>
    else -> false
}

private fun jsonEqual(a: Any?, b: Any?): Boolean {
    if (a is Number && b is Number) {
        if ((a is Long || a is Int) && (b is Long || b is Int)) return a.toLong() == b.toLong()
        return a.toDouble() == b.toDouble()
    }
    if (a is List<*> && b is List<*>) return a.size == b.size && a.indices.all { jsonEqual(a[it], b[it]) }
    if (a is Map<*, *> && b is Map<*, *>) return a.size == b.size && a.keys.all { b.containsKey(it) && jsonEqual(a[it], b[it]) }
    return a == b
}

private fun codePoints(text: String): Int = text.codePointCount(0, text.length)

private val DAYS = intArrayOf(31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)

private fun isDate(y: Int, m: Int, d: Int): Boolean {
    if (m < 1 || m > 12 || d < 1 || d > DAYS[m - 1]) return false
    return !(m == 2 && d == 29 && !(y % 4 == 0 && (y % 100 != 0 || y % 400 == 0)))
}

private val DATE_TIME = Regex("^(\\d{4})-(\\d{2})-(\\d{2})[Tt ](\\d{2}):(\\d{2}):(\\d{2})(\\.\\d+)?([Zz]|[+-]\\d{2}(?::?\\d{2})?)$")
private val DATE = Regex("^(\\d{4})-(\\d{2})-(\\d{2})$")
private val UUID = Regex("^(?:urn:uuid:)?[0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}$")

private fun checkFormat(format: String, text: String): Boolean = when (format) {
    "date-time" -> DATE_TIME.find(text)?.groupValues?.let { g ->
        isDate(g[1].toInt(), g[2].toInt(), g[3].toInt()) && g[4].toInt() <= 23 && g[5].toInt() <= 59 && g[6].toInt() <= 60
    } ?: false
    "date" -> DATE.find(text)?.groupValues?.let { g -> isDate(g[1].toInt(), g[2].toInt(), g[3].toInt()) } ?: false
    "uuid" -> UUID.matches(text)
    // Formats this validator does not know are annotations.
    else -> true
}

private fun matchesPattern(pattern: String, text: String): Boolean {
    val compiled = synchronized(patternCache) {
        patternCache.getOrPut(pattern) { java.util.regex.Pattern.compile(pattern) }
    }
    return try {
        compiled.matcher(text).find()
    } catch (e: StackOverflowError) {
        // java.util.regex recurses once per character through a repeated group: a long string
        // overflows a default thread stack where JavaScript and Python engines do not.
        findOnLargeStack(compiled, text)
    }
}

private fun findOnLargeStack(compiled: java.util.regex.Pattern, text: String): Boolean {
    var found = false
    var failure: Throwable? = null
    val thread = Thread(null, {
        try {
            found = compiled.matcher(text).find()
        } catch (e: Throwable) {
            failure = e
        }
    }, "pattern", 1L shl 30)
    thread.start()
    thread.join()
    failure?.let { throw it }
    return found
}

private fun numberText(n: Any?): String = if (isInteger(n)) (n as Number).toLong().toString() else n.toString()

private fun walk(value: Any?, node: Any?, path: String, errors: MutableList<ValidationError>, depth: Int) {
    fun fail(keyword: String, message: String, at: String = path) {
        errors.add(ValidationError(at, keyword, message))
    }
    if (node == true || node === MISSING) return
    if (node == false) {
        fail("false", "no value is allowed here")
        return
    }
    if (node !is Map<*, *>) return
    if (depth > MAX_VALIDATION_DEPTH) {
        fail("maxDepth", "nesting is deeper than " + MAX_VALIDATION_DEPTH)
        return
    }
    val ref = node["\$ref"]
    if (ref is String) {
        val target = if (ref.startsWith("#")) schemaAt(java.net.URLDecoder.decode(ref.substring(1).replace("+", "%2B"), "UTF-8")) else MISSING
        if (target === MISSING) fail("\$ref", "unresolved schema reference " + ref) else walk(value, target, path, errors, depth + 1)
        if (DRAFT_07) return
    }
    if (node.containsKey("const") && !jsonEqual(value, node["const"])) fail("const", "must equal " + writeJson(node["const"]))
    val enumValues = node["enum"]
    if (enumValues is List<*> && enumValues.none { jsonEqual(value, it) }) fail("enum", "must be one of the allowed values")
    val allOf = node["allOf"]
    if (allOf is List<*>) for (part in allOf) walk(value, part, path, errors, depth + 1)
    for (keyword in listOf("oneOf", "anyOf")) {
        val branches = node[keyword] as? List<*> ?: continue
        var matches = 0
        for (branch in branches) {
            val sub = ArrayList<ValidationError>()
            walk(value, branch, path, sub, depth + 1)
            if (sub.isEmpty()) matches++
        }
        if (keyword == "oneOf" && matches != 1) fail("oneOf", "must match exactly one branch (" + matches + " match)")
        if (keyword == "anyOf" && matches == 0) fail("anyOf", "must match at least one branch")
    }
    if (node.containsKey("not")) {
        val sub = ArrayList<ValidationError>()
        walk(value, node["not"], path, sub, depth + 1)
        if (sub.isEmpty()) fail("not", "must not match the schema under `not`")
    }
    if (node.containsKey("if")) {
        val sub = ArrayList<ValidationError>()
        walk(value, node["if"], path, sub, depth + 1)
        val branch = if (sub.isEmpty()) "then" else "else"
        if (node.containsKey(branch)) walk(value, node[branch], path, errors, depth + 1)
    }
    val type = node["type"]
    val types: List<String> = when (type) {
        is List<*> -> type.filterIsInstance<String>()
        is String -> listOf(type)
        else -> emptyList()
    }
    if (types.isNotEmpty() && types.none { hasType(value, it) }) {
        fail("type", "must be " + types.joinToString(" or "))
        return
    }
    if (value is String) {
        val n = if (node.containsKey("minLength") || node.containsKey("maxLength")) codePoints(value) else 0
        val min = node["minLength"]
        val max = node["maxLength"]
        if (min is Number && n < min.toDouble()) fail("minLength", "must have at least " + numberText(min) + " characters")
        if (max is Number && n > max.toDouble()) fail("maxLength", "must have at most " + numberText(max) + " characters")
        val pattern = node["pattern"]
        if (pattern is String && !matchesPattern(pattern, value)) fail("pattern", "must match the pattern " + pattern)
        val format = node["format"]
        if (format is String && !checkFormat(format, value)) fail("format", "must be a " + format)
    }
    if (isNumber(value) && value !is Boolean) {
        val v = (value as Number).toDouble()
        val minimum = node["minimum"]
        val maximum = node["maximum"]
        val exclusiveMinimum = node["exclusiveMinimum"]
        val exclusiveMaximum = node["exclusiveMaximum"]
        val multipleOf = node["multipleOf"]
        if (minimum is Number && v < minimum.toDouble()) fail("minimum", "must be >= " + numberText(minimum))
        if (maximum is Number && v > maximum.toDouble()) fail("maximum", "must be <= " + numberText(maximum))
        if (exclusiveMinimum is Number && v <= exclusiveMinimum.toDouble()) fail("exclusiveMinimum", "must be > " + numberText(exclusiveMinimum))
        if (exclusiveMaximum is Number && v >= exclusiveMaximum.toDouble()) fail("exclusiveMaximum", "must be < " + numberText(exclusiveMaximum))
        if (multipleOf is Number && multipleOf.toDouble() > 0) {
            val q = v / multipleOf.toDouble()
            if (q.isInfinite() || q.isNaN() || q != Math.rint(q)) fail("multipleOf", "must be a multiple of " + numberText(multipleOf))
        }
    }
    if (value is List<*>) {
        val minItems = node["minItems"]
        val maxItems = node["maxItems"]
        if (minItems is Number && value.size < minItems.toDouble()) fail("minItems", "must have at least " + numberText(minItems) + " items")
        if (maxItems is Number && value.size > maxItems.toDouble()) fail("maxItems", "must have at most " + numberText(maxItems) + " items")
        if (node["uniqueItems"] == true) {
            run outer@{
                for (i in value.indices) {
                    for (j in i + 1 until value.size) {
                        if (jsonEqual(value[i], value[j])) {
                            fail("uniqueItems", "items " + i + " and " + j + " are equal")
                            return@outer
                        }
                    }
                }
            }
        }
        val prefixItems = node["prefixItems"]
        val items = node["items"]
        val tuple: List<*>? = when {
            prefixItems is List<*> -> prefixItems
            items is List<*> -> items
            else -> null
        }
        val rest: Any? = when {
            tuple == null -> if (node.containsKey("items")) items else MISSING
            prefixItems is List<*> -> if (node.containsKey("items")) items else MISSING
            else -> if (node.containsKey("additionalItems")) node["additionalItems"] else MISSING
        }
        for ((i, item) in value.withIndex()) {
            val schema = if (tuple != null && i < tuple.size) tuple[i] else rest
            if (schema !== MISSING) walk(item, schema, path + "/" + i, errors, depth + 1)
        }
        if (node.containsKey("contains")) {
            var count = 0
            for (item in value) {
                val sub = ArrayList<ValidationError>()
                walk(item, node["contains"], path, sub, depth + 1)
                if (sub.isEmpty()) count++
            }
            val minContains = node["minContains"]
            val maxContains = node["maxContains"]
            val min = if (minContains is Number) minContains.toDouble() else 1.0
            if (count < min) fail("contains", "must contain at least " + numberText(if (minContains is Number) minContains else 1L) + " matching items")
            if (maxContains is Number && count > maxContains.toDouble()) fail("maxContains", "must contain at most " + numberText(maxContains) + " matching items")
        }
    }
    if (value is Map<*, *>) {
        val properties = node["properties"] as? Map<*, *> ?: emptyMap<String, Any?>()
        val required = node["required"]
        if (required is List<*>) {
            for (name in required) {
                if (!value.containsKey(name)) fail("required", "the property " + writeJson(name) + " is required")
            }
        }
        for ((name, schema) in properties) {
            if (value.containsKey(name)) walk(value[name], schema, path + "/" + escapeToken(name as String), errors, depth + 1)
        }
        val patterns = node["patternProperties"] as? Map<*, *> ?: emptyMap<String, Any?>()
        for (key in value.keys) {
            val k = key as String
            val at = path + "/" + escapeToken(k)
            var matched = properties.containsKey(k)
            for ((pattern, schema) in patterns) {
                if (matchesPattern(pattern as String, k)) {
                    matched = true
                    walk(value[k], schema, at, errors, depth + 1)
                }
            }
            if (matched || !node.containsKey("additionalProperties")) continue
            val additional = node["additionalProperties"]
            if (additional == false) fail("additionalProperties", "the property " + writeJson(k) + " is not allowed", at)
            else walk(value[k], additional, at, errors, depth + 1)
        }
        if (node.containsKey("propertyNames")) {
            for (key in value.keys) walk(key, node["propertyNames"], path + "/" + escapeToken(key as String), errors, depth + 1)
        }
        val minProperties = node["minProperties"]
        val maxProperties = node["maxProperties"]
        if (minProperties is Number && value.size < minProperties.toDouble()) fail("minProperties", "must have at least " + numberText(minProperties) + " properties")
        if (maxProperties is Number && value.size > maxProperties.toDouble()) fail("maxProperties", "must have at most " + numberText(maxProperties) + " properties")
        val dependent = node["dependentRequired"]
        if (dependent is Map<*, *>) {
            for ((key, names) in dependent) {
                if (!value.containsKey(key) || names !is List<*>) continue
                for (name in names) {
                    if (!value.containsKey(name)) fail("dependentRequired", "the property " + writeJson(name) + " is required when " + writeJson(key) + " is present")
                }
            }
        }
    }
}

/** Validates `value` (decoded JSON, see `parseJson`) against the schema node at `pointer` (a JSON Pointer into the embedded schema). */
fun validateAt(pointer: String, value: Any?): ValidationResult {
    val node = schemaAt(pointer)
    if (node === MISSING) return ValidationResult(false, listOf(ValidationError("", "\$ref", "the schema has no node at " + pointer)))
    val errors = ArrayList<ValidationError>()
    walk(value, node, "", errors, 0)
    return ValidationResult(errors.isEmpty(), errors)
}

/** Validates a whole message against the document root. */
fun validateProtocolMessage(value: Any?): ValidationResult = validateAt("", value)

/** Validates `value` against the definition `name`. */
fun validateDefinition(name: String, value: Any?): ValidationResult {
    val definitions = (SCHEMA as? Map<*, *>)?.get(DEFINITIONS_KEY) as? Map<*, *>
    if (definitions == null || !definitions.containsKey(name)) {
        return ValidationResult(false, listOf(ValidationError("", "\$ref", "unknown definition " + writeJson(name))))
    }
    return validateAt("/" + DEFINITIONS_KEY + "/" + escapeToken(name), value)
}

private fun assertValid(result: ValidationResult) {
    if (!result.ok) throw ProtocolValidationError(result.errors)
}
