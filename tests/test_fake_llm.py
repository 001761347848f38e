from fake_llm import call, text_turn, tool_turn


def test_fake_llm_serves_chat_and_responses_apis(fake_llm):
    import openai

    fake_llm.script(
        [
            tool_turn(call("a", {"x": 1}), call("b", {"y": 2})),
            text_turn("hello world"),
            tool_turn(call("a", {"x": 1})),
            text_turn("bye"),
            text_turn("r1"),
            tool_turn(call("z", {"q": "w"}), text="thinking"),
        ]
    )
    c = openai.OpenAI(base_url=fake_llm.base_url, api_key="k")
    r = c.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    assert [t.function.name for t in r.choices[0].message.tool_calls] == ["a", "b"]
    s = c.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "hi"}], stream=True, stream_options={"include_usage": True}
    )
    chunks = list(s)
    assert "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices) == "hello world"
    assert chunks[-1].usage.prompt_tokens == 207
    s = c.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}], stream=True)
    args = "".join(tc.function.arguments or "" for ch in s for tc in (ch.choices[0].delta.tool_calls or []))
    assert args == '{"x": 1}'
    r = c.responses.create(model="m", input="hi")
    assert r.output_text == "bye" and r.usage.input_tokens == 407
    with c.responses.stream(model="m", input="hi") as st:
        final = st.get_final_response()
    assert final.output_text == "r1"
    with c.responses.stream(model="m", input="hi") as st:
        assert [e.type for e in st][-1] == "response.completed"
        final = st.get_final_response()
    assert final.output[1].name == "z" and final.output[1].arguments == '{"q": "w"}', final
    assert fake_llm.consumed == 6


def test_fake_llm_responses_api_echoes_tools_and_instructions(fake_llm):
    import openai

    fake_llm.script([text_turn("plain"), text_turn("streamed"), text_turn("bare")])
    tool = {
        "type": "function",
        "name": "get_weather",
        "description": "Weather.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        "strict": True,
    }
    c = openai.OpenAI(base_url=fake_llm.base_url, api_key="k")
    r = c.responses.create(model="m", input="hi", instructions="Be brief.", tools=[tool])
    assert r.instructions == "Be brief." and [t.name for t in r.tools] == ["get_weather"]
    assert r.tools[0].parameters == tool["parameters"]
    with c.responses.stream(model="m", input="hi", instructions="Be terse.", tools=[tool]) as st:
        final = st.get_final_response()
    assert final.instructions == "Be terse." and [t.name for t in final.tools] == ["get_weather"]
    # A request without them gets none back, as from the real API.
    bare = c.responses.create(model="m", input="hi")
    assert bare.output_text == "bare" and bare.tools == [] and bare.instructions is None
