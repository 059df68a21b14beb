// decision/*: the model picks one of a fixed set of options (an enum choice), for AI behaviour that must
// stay inside what the game can do. decision/decideMany runs several at once.

using System.Collections.Generic;
using System.Threading;
using System.Threading.Tasks;

namespace Oamd
{
    /// <summary>One decision's answer, or (in DecideManyAsync) its failure.</summary>
    public sealed class Decision
    {
        /// <summary>The chosen option's id, always one of the options given.</summary>
        public readonly string OptionId;
        public readonly string Reasoning;
        /// <summary>0 … 100.</summary>
        public readonly long Confidence;
        /// <summary>The choice is fallbackOptionID because the model failed.</summary>
        public readonly bool IsFallback;
        public readonly List<ToolCallRecord> ToolCalls;
        public readonly Usage Usage;
        public readonly List<string> Warnings;
        /// <summary>Set only by DecideManyAsync, for a decision that failed; the other fields are then empty.</summary>
        public readonly OamdException Error;
        public readonly Dictionary<string, object> Raw;

        internal Decision(Dictionary<string, object> raw)
        {
            Raw = raw ?? new Dictionary<string, object>();
            OptionId = JsonFields.String(Raw, "optionID");
            Reasoning = JsonFields.String(Raw, "reasoning");
            Confidence = JsonFields.Long(Raw, "confidence");
            IsFallback = JsonFields.Bool(Raw, "isFallback");
            ToolCalls = ToolCallRecord.ListOf(Raw);
            Usage = new Usage(JsonFields.Object(Raw, "usage"));
            Warnings = JsonFields.Strings(Raw, "warnings");
            var error = JsonFields.Get(Raw, "error") as Dictionary<string, object>;
            if (error != null) Error = OamdException.FromError(error);
        }
    }

    /// <summary>One decision to make: the <c>DecisionRequest</c> of the protocol.</summary>
    public sealed class DecisionRequest : IJsonValue
    {
        /// <summary>Required: a string or JSON.</summary>
        public object Situation;
        /// <summary>Option ids (strings), or {id, description} dictionaries; unique.</summary>
        public List<object> Options = new List<object>();
        /// <summary>A Persona, or an NPC id (string).</summary>
        public object Actor;
        public object Context;
        public List<ToolDefinition> Tools;
        /// <summary>Chosen when the model fails, instead of an error.</summary>
        public string FallbackOptionId;
        public Dictionary<string, object> Extra = new Dictionary<string, object>();

        public DecisionRequest(object situation, params string[] options)
        {
            Situation = situation;
            foreach (var option in options) Options.Add(option);
        }

        /// <summary>Adds an option with a description the model sees.</summary>
        public DecisionRequest Option(string id, string description)
        {
            Options.Add(new Dictionary<string, object> { { "id", id }, { "description", description } });
            return this;
        }

        public object ToJson()
        {
            return new Dictionary<string, object> { { "situation", Situation }, { "options", Options } }
                .Put("actor", Actor).Put("context", Context).Put("tools", Tools)
                .Put("fallbackOptionID", FallbackOptionId).Merge(Extra);
        }
    }

    public sealed partial class OamdClient
    {
        /// <summary><c>decision/decide</c>. <paramref name="model"/> and <paramref name="settings"/>
        /// (instructions, temperature, maxToolRounds, toolTimeoutSeconds) are DecisionEngineSettings.</summary>
        public async Task<Decision> DecideAsync(DecisionRequest request, object model = null,
            IDictionary<string, object> settings = null, CancellationToken cancellation = default(CancellationToken))
        {
            var p = ((Dictionary<string, object>)request.ToJson()).Put("model", model).Merge(settings);
            return new Decision(await Call("decision/decide", p, cancellation).ConfigureAwait(false));
        }

        /// <summary><c>decision/decideMany</c>: results in request order; a failed one has Error set.</summary>
        public async Task<List<Decision>> DecideManyAsync(IEnumerable<DecisionRequest> requests, long? maxConcurrency = null,
            object model = null, IDictionary<string, object> settings = null,
            CancellationToken cancellation = default(CancellationToken))
        {
            var p = new Dictionary<string, object> { { "requests", requests } }
                .Put("maxConcurrency", maxConcurrency).Put("model", model).Merge(settings);
            var result = await Call("decision/decideMany", p, cancellation).ConfigureAwait(false);
            return JsonFields.Objects(result, "results", o => new Decision(o));
        }
    }
}
