// The Tavern sample's Unity side: a thin MonoBehaviour that starts oamd, plays TavernGame and draws it
// with Unity UI (uGUI: Canvas, Text, Button, Image), built here at runtime, so the sample ships no scene:
// add this component to an empty GameObject in any scene and press Play. It needs the Unity UI package
// (com.unity.ugui, in every new project) and, for the buttons, the legacy Input Manager (with only the new
// Input System, replace StandaloneInputModule by InputSystemUIInputModule below). Copy the folder `make
// dist` (scripted NPCs) or `make dist-llama` (a real model) built, dist/oamd/, to
// Assets/StreamingAssets/oamd/.

#if UNITY_5_3_OR_NEWER
using System;
using System.Collections.Generic;
using System.IO;
using System.Threading.Tasks;
using Oamd;
using UnityEngine;
using UnityEngine.EventSystems;
using UnityEngine.UI;

namespace OamdSamples.Tavern
{
    [AddComponentMenu("oamd/Tavern (sample)")]
    public sealed class TavernUI : MonoBehaviour
    {
        [Tooltip("On: TavernScripts speak for the NPCs, no model needed. Off: the daemon's model below does.")]
        public bool useScriptedModels = true;
        [Tooltip("oamd's --model when not scripted: llamacpp (the model make dist-llama packs), or a better one fetched on first run, e.g. llamacpp:smollm2-360m-instruct?pull=on-request.")]
        public string model = "llamacpp";
        [Tooltip("The folder under StreamingAssets holding the oamd executable.")]
        public string daemonFolder = "oamd";

        static readonly Dictionary<string, Color> EmotionTints = new Dictionary<string, Color> {
            { "happy", new Color(1f, 0.85f, 0.4f) }, { "grateful", new Color(1f, 0.8f, 0.5f) },
            { "amused", new Color(0.95f, 0.75f, 0.35f) }, { "excited", new Color(1f, 0.6f, 0.2f) },
            { "angry", new Color(0.9f, 0.2f, 0.15f) }, { "annoyed", new Color(0.85f, 0.4f, 0.3f) },
            { "suspicious", new Color(0.55f, 0.45f, 0.75f) }, { "worried", new Color(0.45f, 0.55f, 0.8f) },
            { "afraid", new Color(0.35f, 0.4f, 0.6f) }, { "sad", new Color(0.3f, 0.45f, 0.7f) },
        };
        static readonly Color NeutralTint = new Color(0.7f, 0.7f, 0.7f);

        OamdClient _client;
        TavernGame _game;
        Font _font;
        Text _status, _speaker, _emotion, _subtitle, _gold;
        Image _portrait;
        RectTransform _choices;
        readonly List<Button> _buttons = new List<Button>();
        List<Choice> _shownChoices;

        string SavePath
        {
            get { return Path.Combine(Application.persistentDataPath, "tavern-save.json"); }
        }

        async void Start()
        {
            BuildUi();
            await Play(null);
        }

        void OnDestroy()
        {
            Stop();
        }

        // ---- the game --------------------------------------------------------------------------------

        async Task Play(string saved)
        {
            try
            {
                _status.text = "Starting oamd…";
                // Desktop: the client spawns the daemon. On Android/iOS join a running one with ConnectTcpAsync.
                _client = await OamdClient.StartAsync(new OamdProcessOptions {
                    ExecutablePath = OamdExecutable.InStreamingAssets(daemonFolder),
                    Model = useScriptedModels ? null : model,
                    OnLogLine = line => Debug.Log("[oamd] " + line),
                });
                if (!useScriptedModels)
                {
                    // A model with ?pull=on-request is fetched now: progress once a second, on this thread.
                    var ready = await _client.WaitForModelAsync(answer => _status.text = ModelStatus(answer));
                    if (!Equals(Field(ready, "available"), true))
                    {
                        _status.text = "No model: " + Field(ready, "detail");
                        return;
                    }
                }
                _game = saved == null
                    ? await TavernGame.OpenAsync(_client, useScriptedModels)
                    : await TavernGame.LoadAsync(_client, saved, useScriptedModels);
                _game.Changed += Redraw;
                _status.text = saved == null ? "The Drowned Lantern, " + _game.TimeOfDay + "." : "Loaded.";
                Redraw();
                if (saved == null) await _game.PlayerEntersAsync();
            }
            catch (OamdException ex)
            {
                _status.text = "oamd refused: " + ex.Name + ": " + ex.Message;
            }
            catch (Exception ex)
            {
                _status.text = ex.GetType().Name + ": " + ex.Message;
                Debug.LogException(ex);
            }
        }

        void Stop()
        {
            if (_game != null) _game.Dispose();
            _game = null;
            // Ends the daemon (end of input; killed if it lingers).
            if (_client != null) _client.Dispose();
            _client = null;
        }

        async void Run(Func<Task> action)
        {
            try { await action(); }
            catch (Exception ex)
            {
                _status.text = ex.GetType().Name + ": " + ex.Message;
                Debug.LogException(ex);
            }
        }

        void Save()
        {
            Run(async () =>
            {
                File.WriteAllText(SavePath, await _game.SaveAsync());
                _status.text = "Saved to " + SavePath;
            });
        }

        void Load()
        {
            if (!File.Exists(SavePath))
            {
                _status.text = "Nothing saved yet.";
                return;
            }
            // A fresh daemon, as when the player starts the game again tomorrow.
            string saved = File.ReadAllText(SavePath);
            Stop();
            Run(() => Play(saved));
        }

        static string ModelStatus(Dictionary<string, object> answer)
        {
            var done = Field(answer, "bytesDownloaded");
            var total = Field(answer, "totalBytes");
            if (Equals(Field(answer, "status"), "downloading") && done is long && total is long && (long)total > 0)
                return "Fetching the NPCs' model: " + (100 * (long)done / (long)total) + "% of "
                    + ((long)total >> 20) + " MiB";
            return Field(answer, "status") + ": " + Field(answer, "detail");
        }

        static object Field(Dictionary<string, object> o, string key)
        {
            object value;
            return o != null && o.TryGetValue(key, out value) ? value : null;
        }

        // ---- drawing ---------------------------------------------------------------------------------

        void Redraw()
        {
            if (_game == null) return;
            _speaker.text = _game.Speaker == TavernGame.Innkeeper ? "Mira" : _game.Speaker == TavernGame.Guard ? "Brom" : "";
            _subtitle.text = _game.Subtitle;
            _emotion.text = _game.Emotion ?? "";
            Color tint;
            _portrait.color = _game.Emotion != null && EmotionTints.TryGetValue(_game.Emotion, out tint) ? tint : NeutralTint;
            _gold.text = _game.Gold + " gold, " + _game.TimeOfDay + (_game.DoorOpen ? "" : ", outside the door");
            if (_shownChoices != _game.Choices)
            {
                _shownChoices = _game.Choices;
                foreach (var old in _buttons) Destroy(old.gameObject);
                _buttons.Clear();
                foreach (var choice in _game.Choices)
                {
                    var c = choice;
                    string who = c.Npc == TavernGame.Innkeeper ? "Mira" : "Brom";
                    _buttons.Add(MakeButton(_choices, "To " + who + ": " + c.Line, () => Run(() => _game.ChooseAsync(c))));
                }
            }
            foreach (var button in _buttons) button.interactable = !_game.Busy;
        }

        void BuildUi()
        {
#if UNITY_2022_2_OR_NEWER
            _font = Resources.GetBuiltinResource<Font>("LegacyRuntime.ttf");
#else
            _font = Resources.GetBuiltinResource<Font>("Arial.ttf");
#endif
            if (EventSystem.current == null)
                new GameObject("EventSystem", typeof(EventSystem), typeof(StandaloneInputModule));
            var canvasObject = new GameObject("Tavern UI", typeof(RectTransform), typeof(Canvas), typeof(CanvasScaler), typeof(GraphicRaycaster));
            canvasObject.transform.SetParent(transform, false);
            canvasObject.GetComponent<Canvas>().renderMode = RenderMode.ScreenSpaceOverlay;
            var scaler = canvasObject.GetComponent<CanvasScaler>();
            scaler.uiScaleMode = CanvasScaler.ScaleMode.ScaleWithScreenSize;
            scaler.referenceResolution = new Vector2(1280, 720);
            var root = canvasObject.transform;

            _status = MakeText(Box(root, "Status", 0.02f, 0.92f, 0.98f, 0.98f), 18, TextAnchor.MiddleLeft);
            _gold = MakeText(Box(root, "Gold", 0.02f, 0.86f, 0.98f, 0.92f), 18, TextAnchor.MiddleLeft);
            _portrait = Box(root, "Portrait", 0.02f, 0.45f, 0.2f, 0.84f).gameObject.AddComponent<Image>();
            _speaker = MakeText(Box(root, "Speaker", 0.22f, 0.78f, 0.98f, 0.84f), 26, TextAnchor.MiddleLeft);
            _emotion = MakeText(Box(root, "Emotion", 0.22f, 0.72f, 0.98f, 0.78f), 18, TextAnchor.MiddleLeft);
            _subtitle = MakeText(Box(root, "Subtitle", 0.22f, 0.45f, 0.98f, 0.72f), 24, TextAnchor.UpperLeft);
            _choices = Box(root, "Choices", 0.02f, 0.12f, 0.98f, 0.43f);
            var layout = _choices.gameObject.AddComponent<VerticalLayoutGroup>();
            layout.spacing = 6;
            layout.childControlHeight = false;
            layout.childForceExpandHeight = false;
            layout.childControlWidth = true;
            layout.childForceExpandWidth = true;
            var bar = Box(root, "Game", 0.02f, 0.02f, 0.98f, 0.1f);
            var row = bar.gameObject.AddComponent<HorizontalLayoutGroup>();
            row.spacing = 12;
            row.childControlWidth = true;
            row.childForceExpandWidth = true;
            MakeButton(bar, "Let time pass", () => Run(() => _game.PassTimeAsync()));
            MakeButton(bar, "Save", Save);
            MakeButton(bar, "Load", Load);
        }

        static RectTransform Box(Transform parent, string name, float xMin, float yMin, float xMax, float yMax)
        {
            var box = new GameObject(name, typeof(RectTransform)).GetComponent<RectTransform>();
            box.SetParent(parent, false);
            box.anchorMin = new Vector2(xMin, yMin);
            box.anchorMax = new Vector2(xMax, yMax);
            box.offsetMin = Vector2.zero;
            box.offsetMax = Vector2.zero;
            return box;
        }

        Text MakeText(RectTransform box, int size, TextAnchor anchor)
        {
            var text = box.gameObject.AddComponent<Text>();
            text.font = _font;
            text.fontSize = size;
            text.alignment = anchor;
            text.color = Color.white;
            text.horizontalOverflow = HorizontalWrapMode.Wrap;
            text.verticalOverflow = VerticalWrapMode.Overflow;
            return text;
        }

        Button MakeButton(Transform parent, string label, UnityEngine.Events.UnityAction onClick)
        {
            var box = new GameObject(label, typeof(RectTransform)).GetComponent<RectTransform>();
            box.SetParent(parent, false);
            box.sizeDelta = new Vector2(0, 40);
            var image = box.gameObject.AddComponent<Image>();
            image.color = new Color(0.25f, 0.18f, 0.12f);
            var button = box.gameObject.AddComponent<Button>();
            button.targetGraphic = image;
            button.onClick.AddListener(onClick);
            var text = MakeText(Box(box, "Label", 0.02f, 0f, 0.98f, 1f), 18, TextAnchor.MiddleLeft);
            text.text = label;
            return button;
        }
    }
}
#endif
