package org.json;
/** Stub: a flat object of strings, numbers and booleans (enough for the backends' options). */
public class JSONObject {
    private final java.util.Map<String, Object> values = new java.util.LinkedHashMap<>();
    public JSONObject() {}
    public JSONObject(String json) throws JSONException {
        String s = json.trim();
        if (!s.startsWith("{") || !s.endsWith("}")) throw new JSONException("not an object: " + json);
        int i = 1;
        int end = s.length() - 1;
        while (i < end) {
            i = skip(s, i);
            if (i >= end) break;
            int[] at = {i};
            String key = string(s, at);
            i = skip(s, at[0]);
            if (s.charAt(i) != ':') throw new JSONException("expected ':' in " + json);
            i = skip(s, i + 1);
            Object value;
            if (s.charAt(i) == '"') {
                at[0] = i;
                value = string(s, at);
                i = at[0];
            } else {
                int start = i;
                while (i < end && s.charAt(i) != ',' && !Character.isWhitespace(s.charAt(i))) i++;
                String raw = s.substring(start, i);
                if (raw.equals("true") || raw.equals("false")) value = Boolean.valueOf(raw);
                else value = Double.valueOf(raw);
            }
            values.put(key, value);
            i = skip(s, i);
            if (i < end && s.charAt(i) == ',') i++;
        }
    }
    private static int skip(String s, int i) {
        while (i < s.length() && Character.isWhitespace(s.charAt(i))) i++;
        return i;
    }
    private static String string(String s, int[] at) throws JSONException {
        int i = at[0];
        if (s.charAt(i) != '"') throw new JSONException("expected a string at " + i);
        StringBuilder out = new StringBuilder();
        for (i++; s.charAt(i) != '"'; i++) {
            char c = s.charAt(i);
            if (c == '\\') {
                char e = s.charAt(++i);
                out.append(e == 'n' ? '\n' : e == 't' ? '\t' : e);
            } else {
                out.append(c);
            }
        }
        at[0] = i + 1;
        return out.toString();
    }
    public JSONObject put(String key, Object value) throws JSONException { values.put(key, value); return this; }
    public JSONObject put(String key, int value) throws JSONException { values.put(key, (double) value); return this; }
    public JSONObject put(String key, long value) throws JSONException { values.put(key, (double) value); return this; }
    public boolean has(String key) { return values.containsKey(key); }
    public String optString(String key, String fallback) {
        Object v = values.get(key);
        return v == null ? fallback : String.valueOf(v);
    }
    public int optInt(String key) { return optInt(key, 0); }
    public int optInt(String key, int fallback) { return (int) optDouble(key, fallback); }
    public double optDouble(String key) { return optDouble(key, Double.NaN); }
    public double optDouble(String key, double fallback) {
        Object v = values.get(key);
        return v instanceof Double ? (Double) v : fallback;
    }
    @Override public String toString() { return values.toString(); }
}
