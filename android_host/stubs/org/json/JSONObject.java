package org.json;

import java.util.LinkedHashMap;
import java.util.Map;

// Android's org.json, as far as the backends use it: flat objects of strings, numbers and
// booleans (enough for the desktop tests of LiteRtBackend; no nesting, no arrays).
public class JSONObject {
    private final Map<String, Object> map = new LinkedHashMap<>();

    public JSONObject() {}

    public JSONObject(String json) throws JSONException {
        String s = json == null ? "" : json.trim();
        if (!s.startsWith("{") || !s.endsWith("}")) throw new JSONException("not an object: " + json);
        int[] i = {1};
        skip(s, i);
        if (s.charAt(i[0]) == '}') return;
        while (true) {
            skip(s, i);
            String key = string(s, i);
            skip(s, i);
            if (s.charAt(i[0]++) != ':') throw new JSONException("expected ':' in " + json);
            skip(s, i);
            map.put(key, value(s, i));
            skip(s, i);
            char c = s.charAt(i[0]++);
            if (c == '}') return;
            if (c != ',') throw new JSONException("expected ',' in " + json);
        }
    }

    private static void skip(String s, int[] i) {
        while (i[0] < s.length() && Character.isWhitespace(s.charAt(i[0]))) i[0]++;
    }

    private static String string(String s, int[] i) throws JSONException {
        if (s.charAt(i[0]++) != '"') throw new JSONException("expected a string in " + s);
        StringBuilder b = new StringBuilder();
        while (true) {
            char c = s.charAt(i[0]++);
            if (c == '"') return b.toString();
            if (c == '\\') {
                char e = s.charAt(i[0]++);
                switch (e) {
                    case 'n': b.append('\n'); break;
                    case 't': b.append('\t'); break;
                    case 'r': b.append('\r'); break;
                    case 'b': b.append('\b'); break;
                    case 'f': b.append('\f'); break;
                    case 'u': b.append((char) Integer.parseInt(s.substring(i[0], i[0] + 4), 16)); i[0] += 4; break;
                    default: b.append(e);
                }
            } else {
                b.append(c);
            }
        }
    }

    private static Object value(String s, int[] i) throws JSONException {
        char c = s.charAt(i[0]);
        if (c == '"') return string(s, i);
        int start = i[0];
        while (i[0] < s.length() && ",}".indexOf(s.charAt(i[0])) < 0 && !Character.isWhitespace(s.charAt(i[0]))) i[0]++;
        String token = s.substring(start, i[0]);
        if (token.equals("true") || token.equals("false")) return Boolean.valueOf(token);
        if (token.equals("null")) return null;
        try {
            return token.matches("-?\\d+") ? (Object) Long.valueOf(token) : (Object) Double.valueOf(token);
        } catch (NumberFormatException e) {
            throw new JSONException("bad value " + token);
        }
    }

    public JSONObject put(String key, Object value) throws JSONException { map.put(key, value); return this; }
    public JSONObject put(String key, int value) throws JSONException { map.put(key, (long) value); return this; }
    public JSONObject put(String key, long value) throws JSONException { map.put(key, value); return this; }
    public boolean has(String key) { return map.containsKey(key); }
    public String optString(String key, String fallback) {
        Object v = map.get(key);
        return v == null ? fallback : String.valueOf(v);
    }
    public int optInt(String key) { return optInt(key, 0); }
    public int optInt(String key, int fallback) {
        Object v = map.get(key);
        return v instanceof Number ? ((Number) v).intValue() : fallback;
    }
    public double optDouble(String key) { return optDouble(key, Double.NaN); }
    public double optDouble(String key, double fallback) {
        Object v = map.get(key);
        return v instanceof Number ? ((Number) v).doubleValue() : fallback;
    }

    @Override public String toString() {
        StringBuilder b = new StringBuilder("{");
        for (Map.Entry<String, Object> e : map.entrySet()) {
            if (b.length() > 1) b.append(',');
            quote(b, e.getKey());
            b.append(':');
            Object v = e.getValue();
            if (v instanceof String) quote(b, (String) v);
            else b.append(v);
        }
        return b.append('}').toString();
    }

    private static void quote(StringBuilder b, String s) {
        b.append('"');
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') b.append('\\').append(c);
            else if (c < 0x20) b.append(String.format("\\u%04x", (int) c));
            else b.append(c);
        }
        b.append('"');
    }
}
