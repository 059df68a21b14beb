// Json: the package's only JSON code, so it needs no dependency (Unity's JsonUtility cannot read free-form
// objects). Objects are Dictionary<string, object>, arrays List<object>, integers long, other numbers double.
// Write also takes any IDictionary (keys as text), IEnumerable, IJsonValue and the CLR number types.
// Both directions stop at MaxDepth levels of nesting, so a hostile line or a cyclic value raises an
// exception instead of a StackOverflowException, which no code can catch and which ends the whole player.

using System;
using System.Collections;
using System.Collections.Generic;
using System.Globalization;
using System.Text;

namespace Oamd
{
    /// <summary>A value that knows its own JSON shape (tool definitions, scripted models, personas).</summary>
    public interface IJsonValue
    {
        object ToJson();
    }

    public static class Json
    {
        /// <summary>Deepest nesting of arrays and objects Read and Write accept: four times what the daemon
        /// takes in one line (128), so nothing it sends is refused, and far from the stack's end.</summary>
        public const int MaxDepth = 512;

        /// <summary>Compact JSON text of <paramref name="value"/>, on one line.</summary>
        public static string Write(object value)
        {
            var sb = new StringBuilder();
            WriteValue(sb, value, 0);
            return sb.ToString();
        }

        /// <summary>Parses one JSON value. Raises FormatException on malformed or too deeply nested text.
        /// A number too large for a double reads as an infinity.</summary>
        public static object Read(string text)
        {
            int i = 0;
            object value = ReadValue(text, ref i, 0);
            SkipSpace(text, ref i);
            if (i != text.Length) throw new FormatException("Trailing characters after the JSON value at " + i + ".");
            return value;
        }

        static void WriteValue(StringBuilder sb, object v, int depth)
        {
            if (depth > MaxDepth)
                throw new ArgumentException("A value to send is nested deeper than " + MaxDepth + " levels (a cycle?).");
            if (v == null) sb.Append("null");
            else if (v is string) WriteString(sb, (string)v);
            else if (v is bool) sb.Append((bool)v ? "true" : "false");
            else if (v is IJsonValue) WriteValue(sb, ((IJsonValue)v).ToJson(), depth + 1);
            else if (v is double || v is float || v is decimal) WriteDouble(sb, Convert.ToDouble(v, CultureInfo.InvariantCulture));
            else if (v is IConvertible && IsInteger((IConvertible)v)) sb.Append(Convert.ToString(v, CultureInfo.InvariantCulture));
            else if (v is IDictionary<string, object>)
            {
                sb.Append('{');
                bool first = true;
                foreach (var kv in (IDictionary<string, object>)v)
                {
                    if (!first) sb.Append(',');
                    first = false;
                    WriteString(sb, kv.Key);
                    sb.Append(':');
                    WriteValue(sb, kv.Value, depth + 1);
                }
                sb.Append('}');
            }
            else if (v is IDictionary)
            {
                // Dictionary<string, int>, Hashtable…: without this branch they are IEnumerable and would be
                // written as an array of "[key, value]" strings.
                sb.Append('{');
                bool first = true;
                foreach (DictionaryEntry entry in (IDictionary)v)
                {
                    if (!first) sb.Append(',');
                    first = false;
                    WriteString(sb, Convert.ToString(entry.Key, CultureInfo.InvariantCulture));
                    sb.Append(':');
                    WriteValue(sb, entry.Value, depth + 1);
                }
                sb.Append('}');
            }
            else if (v is IEnumerable)
            {
                sb.Append('[');
                bool first = true;
                foreach (var item in (IEnumerable)v)
                {
                    if (!first) sb.Append(',');
                    first = false;
                    WriteValue(sb, item, depth + 1);
                }
                sb.Append(']');
            }
            else WriteString(sb, Convert.ToString(v, CultureInfo.InvariantCulture));  // enums, chars: their text
        }

        static bool IsInteger(IConvertible v)
        {
            switch (v.GetTypeCode())
            {
                case TypeCode.SByte: case TypeCode.Byte: case TypeCode.Int16: case TypeCode.UInt16:
                case TypeCode.Int32: case TypeCode.UInt32: case TypeCode.Int64: case TypeCode.UInt64:
                    return !(v is Enum);
                default:
                    return false;
            }
        }

        static void WriteDouble(StringBuilder sb, double d)
        {
            // JSON has no NaN or infinity; null is what JavaScript's JSON.stringify writes for them.
            if (double.IsNaN(d) || double.IsInfinity(d)) sb.Append("null");
            else sb.Append(d.ToString("R", CultureInfo.InvariantCulture));
        }

        static void WriteString(StringBuilder sb, string s)
        {
            sb.Append('"');
            foreach (char c in s)
            {
                if (c == '"') sb.Append("\\\"");
                else if (c == '\\') sb.Append("\\\\");
                else if (c == '\n') sb.Append("\\n");
                else if (c < ' ' || c == '\u2028' || c == '\u2029') sb.Append("\\u").Append(((int)c).ToString("x4"));
                else sb.Append(c);
            }
            sb.Append('"');
        }

        static void SkipSpace(string s, ref int i)
        {
            while (i < s.Length && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r' || s[i] == '\n')) i++;
        }

        static char Peek(string s, int i)
        {
            if (i >= s.Length) throw new FormatException("Unexpected end of JSON.");
            return s[i];
        }

        static object ReadValue(string s, ref int i, int depth)
        {
            SkipSpace(s, ref i);
            char c = Peek(s, i);
            if ((c == '{' || c == '[') && depth >= MaxDepth)
                throw new FormatException("JSON nested deeper than " + MaxDepth + " levels at " + i + ".");
            if (c == '{') return ReadObject(s, ref i, depth + 1);
            if (c == '[') return ReadArray(s, ref i, depth + 1);
            if (c == '"') return ReadString(s, ref i);
            if (string.CompareOrdinal(s, i, "true", 0, 4) == 0) { i += 4; return true; }
            if (string.CompareOrdinal(s, i, "false", 0, 5) == 0) { i += 5; return false; }
            if (string.CompareOrdinal(s, i, "null", 0, 4) == 0) { i += 4; return null; }
            int start = i;
            while (i < s.Length && "+-0123456789.eE".IndexOf(s[i]) >= 0) i++;
            if (i == start) throw new FormatException("Unexpected '" + c + "' at " + i + ".");
            string number = s.Substring(start, i - start);
            long integer;
            if (long.TryParse(number, NumberStyles.AllowLeadingSign, CultureInfo.InvariantCulture, out integer)) return integer;
            try
            {
                return double.Parse(number, NumberStyles.Float, CultureInfo.InvariantCulture);
            }
            catch (OverflowException)
            {
                // .NET Framework and Mono raise where .NET Core returns an infinity; a 400-digit integer
                // another client stored in a world must not stop the reader.
                return number[0] == '-' ? double.NegativeInfinity : double.PositiveInfinity;
            }
        }

        static Dictionary<string, object> ReadObject(string s, ref int i, int depth)
        {
            var obj = new Dictionary<string, object>();
            i++;
            SkipSpace(s, ref i);
            if (Peek(s, i) == '}') { i++; return obj; }
            while (true)
            {
                SkipSpace(s, ref i);
                string key = ReadString(s, ref i);
                SkipSpace(s, ref i);
                Expect(s, ref i, ':');
                obj[key] = ReadValue(s, ref i, depth);
                SkipSpace(s, ref i);
                if (Peek(s, i) == ',') { i++; continue; }
                Expect(s, ref i, '}');
                return obj;
            }
        }

        static List<object> ReadArray(string s, ref int i, int depth)
        {
            var list = new List<object>();
            i++;
            SkipSpace(s, ref i);
            if (Peek(s, i) == ']') { i++; return list; }
            while (true)
            {
                list.Add(ReadValue(s, ref i, depth));
                SkipSpace(s, ref i);
                if (Peek(s, i) == ',') { i++; continue; }
                Expect(s, ref i, ']');
                return list;
            }
        }

        static void Expect(string s, ref int i, char c)
        {
            if (Peek(s, i) != c) throw new FormatException("Expected '" + c + "' at " + i + ".");
            i++;
        }

        static string ReadString(string s, ref int i)
        {
            Expect(s, ref i, '"');
            var sb = new StringBuilder();
            while (true)
            {
                char c = Peek(s, i++);
                if (c == '"') return sb.ToString();
                if (c != '\\') { sb.Append(c); continue; }
                char e = Peek(s, i++);
                switch (e)
                {
                    case 'n': sb.Append('\n'); break;
                    case 't': sb.Append('\t'); break;
                    case 'r': sb.Append('\r'); break;
                    case 'b': sb.Append('\b'); break;
                    case 'f': sb.Append('\f'); break;
                    case 'u':
                        int code;
                        if (i + 4 > s.Length || !int.TryParse(s.Substring(i, 4), NumberStyles.AllowHexSpecifier,
                                CultureInfo.InvariantCulture, out code))
                            throw new FormatException("Expected four hex digits after \\u at " + i + ".");
                        sb.Append((char)code);
                        i += 4;
                        break;
                    default: sb.Append(e); break;  // \" \\ \/
                }
            }
        }
    }
}
